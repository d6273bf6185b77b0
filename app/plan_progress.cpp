#include "app/plan_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace ustrain::app {

PlanProgress::PlanProgress() : terminal_(isatty(STDERR_FILENO) == 1) {}

void PlanProgress::show(const char* stage, std::size_t done, std::size_t layouts) {
  const Clock::time_point now = Clock::now();
  const auto every = terminal_ ? std::chrono::milliseconds(250) : std::chrono::milliseconds(10000);
  if (now - start_ < std::chrono::seconds(1) || (shown_ && now - last_ < every)) return;
  last_ = now;
  shown_ = true;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  fmt::print(stderr, "{}plan: {}/{} layouts {}, {:.0f} s{}", terminal_ ? "\r" : "", done, layouts, stage, seconds,
             terminal_ ? "" : "\n");
  std::fflush(stderr);
}

void PlanProgress::finish() {
  if (terminal_ && shown_) fmt::print(stderr, "\n");
}

}  // namespace ustrain::app
