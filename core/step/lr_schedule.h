// Learning-rate schedules: linear warmup, then cosine, linear, constant or
// warmup-stable-decay (wsd) down to min_lr at the last step.
#pragma once

#include <cstdint>
#include <string>

namespace ustrain {

struct LrScheduleConfig {
  double lr = 3e-4;
  double min_lr = 0;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  std::string decay = "cosine";     // cosine | linear | constant | wsd
  double wsd_decay_fraction = 0.2;  // wsd: share of all steps spent in the final decay
};

// Learning rate for 1-based optimizer step `step`. While step <= warmup_steps it is
// lr * step / warmup_steps; afterwards, with t = (step - warmup) / (total - warmup):
//   cosine:   min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * t))
//   linear:   lr + (min_lr - lr) * t
//   constant: lr
//   wsd:      lr until step total * (1 - wsd_decay_fraction) (never before the end of
//             warmup), then linear to min_lr at total_steps.
// Steps past total_steps keep the final value. Throws UserError for an unknown decay or
// out-of-range settings, naming the schedule.* recipe key.
double lr_at(const LrScheduleConfig& config, std::int64_t step);

}  // namespace ustrain
