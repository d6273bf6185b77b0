// A rank that runs slower than the others (a throttled GPU, a busy host, a slow link) makes every
// collective wait for it: the others' time blocked in communication grows while its own stays
// small. So each rank's busy time per step (its step time less the time it spent blocked
// waiting for its peers, parallel/comm/communicator.h) is compared every log interval over the world.
//
// The decision: the rank with the most busy time is a straggler for an interval when it exceeds
// the median rank's by more than 10% of the mean step time and by at least 2 ms; it is named
// once it has been the straggler for two intervals in a row (one slow interval, such as a
// checkpoint or a page fault storm, is not a pattern).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "parallel/process_groups.h"
#include "parallel/comm/trace.h"

namespace ustrain {

struct Straggler {
  int rank = 0;
  double lag_ms = 0;   // its busy time per step above the median rank's
  double step_ms = 0;  // the mean step time, for scale
  int intervals = 0;   // log intervals in a row it has been the straggler
};

// Which rank of `busy_ms` (busy time per step, by rank) is slower than the others by the rule
// above, for one interval; `step_ms` the mean step time.
std::optional<Straggler> slowest_rank(std::span<const double> busy_ms, double step_ms);

// A mark on the training loop's track of a trace that records now: "straggler: rank R".
void trace_straggler(Tracer* tracer, const Straggler& s);

class StragglerWatch {
 public:
  // After each step: its time and the seconds this rank was blocked in it.
  void add_step(double step_seconds, double blocked_seconds);
  // Collective over `world`, at the end of a log interval: the straggler named by the rule above,
  // if any (the same answer on every rank).
  std::optional<Straggler> compare(ProcessGroup& world);

  static constexpr int kIntervalsInARow = 2;

 private:
  double step_seconds_ = 0, blocked_seconds_ = 0;  // this interval's
  int steps_ = 0;
  std::optional<Straggler> last_;
};

}  // namespace ustrain
