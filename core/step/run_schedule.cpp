#include "core/step/run_schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/error.h"

namespace ustrain {

LrScheduleConfig schedule_of(const Recipe& r) {
  return LrScheduleConfig{r.optim.lr, r.schedule.min_lr, std::min(r.schedule.warmup_steps, r.train.steps),
                          r.train.steps, r.schedule.decay, r.schedule.wsd_decay_fraction};
}

std::optional<std::string> shortened_warmup_note(const Recipe& r) {
  if (r.schedule.warmup_steps <= r.train.steps) return std::nullopt;
  return fmt::format("schedule.warmup_steps = {} is more than train.steps = {}: warming up over all {} steps instead, "
                     "so the learning rate reaches optim.lr = {} only at the last step",
                     r.schedule.warmup_steps, r.train.steps, r.train.steps, r.optim.lr);
}

std::optional<std::string> stretched_schedule_note(const std::string& saved_toml, const Recipe& current,
                                                   std::int64_t step) {
  if (step < 1 || step >= current.train.steps) return std::nullopt;
  Recipe saved;
  try {
    saved = parse_recipe(saved_toml, "the checkpoint's recipe");
  } catch (const UserError&) {
    return std::nullopt;  // a recipe of another build: the recipe changes are listed anyway
  }
  if (saved.train.steps == current.train.steps) return std::nullopt;
  const double before = lr_at(schedule_of(saved), step);
  const double after = lr_at(schedule_of(current), step + 1);
  std::string text = fmt::format(
      "train.steps is {}, the checkpoint's run planned {}: the learning-rate schedule is {} to end at step {} instead "
      "of {}",
      current.train.steps, saved.train.steps, current.train.steps > saved.train.steps ? "stretched" : "squeezed",
      current.train.steps, saved.train.steps);
  if (after != before)
    text += fmt::format(", so the learning rate {} from {:.3e} at step {} to {:.3e} at step {}",
                        after > before ? "goes back up" : "drops", before, step, after, step + 1);
  else
    text += fmt::format("; the learning rate stays {:.3e} at step {}", after, step + 1);
  if (current.schedule.decay != "constant")
    text += fmt::format(" and decays ({}) to schedule.min_lr = {} by step {}", current.schedule.decay,
                        current.schedule.min_lr, current.train.steps);
  return text;
}

}  // namespace ustrain
