// Wall-clock time per phase of a training step (data, forward, backward, optimizer).
#pragma once

#include <array>
#include <chrono>

namespace ustrain {

enum class Phase : int { data = 0, forward, backward, optimizer };
inline constexpr int kPhases = 4;
inline const char* phase_name(Phase p) {
  static constexpr const char* kNames[kPhases] = {"data", "forward", "backward", "optimizer"};
  return kNames[static_cast<int>(p)];
}

class PhaseTimer {
 public:
  using Clock = std::chrono::steady_clock;
  // Adds the time since the previous mark (or reset) to `p`.
  void mark(Phase p) {
    const auto now = Clock::now();
    seconds_[static_cast<std::size_t>(p)] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  void restart() { last_ = Clock::now(); }
  double seconds(Phase p) const { return seconds_[static_cast<std::size_t>(p)]; }
  double total() const { return seconds_[0] + seconds_[1] + seconds_[2] + seconds_[3]; }
  void clear() { seconds_ = {}; }

 private:
  Clock::time_point last_ = Clock::now();
  std::array<double, kPhases> seconds_{};
};

}  // namespace ustrain
