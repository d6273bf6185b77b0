#include "core/monitor/applied_steps.h"

#include <fmt/format.h>

namespace ustrain {
namespace {

std::string overflow_advice(const AppliedSteps& s) {
  // Each overflow halves the scale: a lower start, or more steps, reach one the gradients fit.
  if (s.resumed)
    return fmt::format("the loss scale comes from the checkpoint resumed from; resume with more train.steps (each "
                       "overflow halves the scale, now {}, until the gradients fit) or train in bf16 "
                       "(train.precision = \"bf16\")",
                       s.scale_now);
  return fmt::format("start the run again (--overwrite) with a lower train.loss_scale_init ({} or less; 65536 = "
                     "2^16 is the usual start) or more train.steps (each overflow halves the scale until the gradients "
                     "fit), or train in bf16 (train.precision = \"bf16\")",
                     s.scale_now);
}

}  // namespace

std::optional<std::string> no_step_applied(const AppliedSteps& s) {
  if (s.taken() <= 0 || s.applied > 0) return std::nullopt;
  std::string causes;
  if (s.overflowed > 0)
    causes = fmt::format("the fp16 gradients overflowed at {} of them, the loss scale falling from {} to {}",
                         s.overflowed, s.scale_at_start, s.scale_now);
  if (s.nonfinite > 0)
    causes += fmt::format("{}{} had a non-finite loss or gradient norm", causes.empty() ? "" : " and ", s.nonfinite);
  const std::string advice =
      s.overflowed > 0 ? overflow_advice(s)
                       : std::string("lower optim.lr, raise schedule.warmup_steps or lower train.grad_clip, then start "
                                     "the run again (--overwrite)");
  return fmt::format("none of the {} steps this run took (steps {}-{}) was applied, so training changed nothing: {}; "
                     "no final checkpoint was written. {}",
                     s.taken(), s.first, s.last, causes, advice);
}

}  // namespace ustrain
