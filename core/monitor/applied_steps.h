// Whether the steps a run took changed the model. A skipped step (fp16 gradients that
// overflowed, or a non-finite loss or gradient norm) leaves the model as it was, and a few
// skipped steps are normal under fp16; a run that reached train.steps without applying any of
// the steps it took trained nothing, and says so with an error rather than a summary that
// looks like success.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ustrain {

struct AppliedSteps {
  std::int64_t first = 1, last = 0;  // the steps this process took
  std::int64_t applied = 0;          // of those, the ones whose update was applied
  std::int64_t overflowed = 0;       // skipped by the fp16 loss scaler
  std::int64_t nonfinite = 0;        // skipped for a non-finite loss or gradient norm
  double scale_at_start = 1, scale_now = 1;  // the fp16 loss scale before the first of them, and now
  bool resumed = false;              // the first scale came from a checkpoint, not train.loss_scale_init

  std::int64_t taken() const { return last - first + 1; }
};

// The error to stop with when steps were taken and none of them was applied: what skipped
// them, the loss scale, and what to change. nullopt otherwise.
std::optional<std::string> no_step_applied(const AppliedSteps& s);

}  // namespace ustrain
