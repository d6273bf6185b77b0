#include "core/monitor/expert_starvation.h"

#include <algorithm>

namespace ustrain {

bool ExpertStarvationWatch::add_step(int layer, std::span<const float> load, StarvingLayer& starving) {
  Streak& s = streaks_[layer];
  const auto any = [](const std::vector<bool>& v) { return std::find(v.begin(), v.end(), true) != v.end(); };
  std::vector<bool> idle(load.size());
  for (std::size_t e = 0; e < load.size(); ++e) idle[e] = load[e] == 0;
  if (s.steps > 0) {
    std::vector<bool> still(load.size());
    for (std::size_t e = 0; e < load.size(); ++e) still[e] = s.idle[e] && idle[e];
    if (any(still)) {
      s.idle = std::move(still);
    } else {
      s = Streak{};  // no expert stayed idle throughout: a new streak may start now
    }
  }
  if (s.steps == 0) s.idle = std::move(idle);
  if (!any(s.idle)) return false;
  if (++s.steps != patience_) return false;
  starving = {layer, std::count(s.idle.begin(), s.idle.end(), true), static_cast<std::int64_t>(load.size())};
  return true;
}

}  // namespace ustrain
