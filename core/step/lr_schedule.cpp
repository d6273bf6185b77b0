#include "core/step/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/error.h"

namespace ustrain {

namespace {

void check_config(const LrScheduleConfig& c) {
  if (c.decay != "cosine" && c.decay != "linear" && c.decay != "constant" && c.decay != "wsd")
    throw UserError("schedule.decay: unknown '" + c.decay +
                    "'; use cosine, linear, constant or wsd");
  if (c.total_steps < 1) throw UserError("train.steps: must be at least 1");
  if (c.warmup_steps < 0) throw UserError("schedule.warmup_steps: must be 0 or more");
  if (!(c.wsd_decay_fraction >= 0 && c.wsd_decay_fraction <= 1))
    throw UserError("schedule.wsd_decay_fraction: must be between 0 and 1");
}

// Linear interpolation from `from` (at start) to `to` (at end), clamped outside; exact at
// both ends, so the last step gets exactly min_lr.
double linear_between(double from, double to, double start, double end, double x) {
  if (x <= start) return from;
  if (x >= end) return to;
  return from + (to - from) * (x - start) / (end - start);
}

}  // namespace

double lr_at(const LrScheduleConfig& c, std::int64_t step) {
  check_config(c);
  USTRAIN_ASSERT(step >= 1, "optimizer steps are 1-based");
  const double lr = c.lr, min_lr = c.min_lr;
  const auto warmup = static_cast<double>(c.warmup_steps);
  const auto total = static_cast<double>(c.total_steps);
  step = std::min(step, c.total_steps);  // past the end, the final value stays
  const auto s = static_cast<double>(step);
  if (step <= c.warmup_steps) return lr * s / warmup;
  if (c.decay == "constant") return lr;
  if (c.decay == "wsd") {
    const double decay_start = std::max(warmup, total * (1.0 - c.wsd_decay_fraction));
    return linear_between(lr, min_lr, decay_start, total, s);
  }
  if (c.decay == "linear") return linear_between(lr, min_lr, warmup, total, s);
  // Here warmup < step <= total, so the division is safe and t is in (0, 1].
  const double t = (s - warmup) / (total - warmup);
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
}

}  // namespace ustrain
