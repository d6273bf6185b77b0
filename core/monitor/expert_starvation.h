// Expert collapse, caught as it happens: a mixture-of-experts router that is not balanced can
// learn to send every token to a few experts, and the others then receive no token and no
// gradient, for good. The watch reads each MoE layer's per-expert load after every step and
// names a layer once some of its experts have received no token for `patience` steps in a row.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace ustrain {

struct StarvingLayer {
  int layer = 0;
  std::int64_t starving = 0;  // experts that received no token in each of the steps
  std::int64_t experts = 0;
};

class ExpertStarvationWatch {
 public:
  explicit ExpertStarvationWatch(std::int64_t patience) : patience_(patience) {}

  // After a step: `load` is MoE layer `layer`'s token choices per expert over the whole global
  // batch. True when this step completes `patience` steps in a row through which the same
  // experts (at least one) received no token, then filling `starving`; once per streak (the
  // streak ends when every expert idle in it has received a token).
  bool add_step(int layer, std::span<const float> load, StarvingLayer& starving);

  std::int64_t patience() const { return patience_; }

 private:
  struct Streak {
    std::int64_t steps = 0;
    std::vector<bool> idle;  // per expert: no token in any step of the streak
  };
  std::int64_t patience_;
  std::map<int, Streak> streaks_;  // by layer
};

}  // namespace ustrain
