// `ustrain plan`'s progress on stderr while it plans: "plan: 37/412 layouts bounded, 12 s", updated in
// place on a terminal, and a line every 10 s otherwise (a log is not flooded); nothing for a
// plan done within a second.
#pragma once

#include <chrono>
#include <cstddef>

namespace ustrain::app {

class PlanProgress {
 public:
  PlanProgress();
  void show(const char* stage, std::size_t done, std::size_t layouts);
  // Ends the line updated in place, if one was shown.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_ = Clock::now(), last_ = start_;
  bool terminal_ = false;
  bool shown_ = false;
};

}  // namespace ustrain::app
