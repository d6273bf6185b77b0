#include "core/step/loss_scaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/error.h"

namespace ustrain {

LossScaler::LossScaler(bool enabled, double initial, std::int64_t growth_interval)
    : enabled_(enabled), scale_(enabled ? initial : 1.0), growth_interval_(growth_interval) {
  USTRAIN_ASSERT(initial >= kMinScale && initial <= kMaxScale && growth_interval >= 1, "bad loss-scaler settings");
}

void LossScaler::restore(double scale) {
  if (!enabled_) return;
  if (!(scale >= kMinScale) || !std::isfinite(scale))
    throw UserError(fmt::format("the checkpoint's loss scale {} is not a usable fp16 loss scale (finite, at least {}); "
                                "resume from another checkpoint",
                                scale, kMinScale));
  scale_ = scale;
  clean_steps_ = 0;
}

bool LossScaler::update(bool gradients_finite, std::int64_t step) {
  if (!enabled_) return true;  // non-finite gradients then show in the loss or the norm
  if (gradients_finite) {
    if (++clean_steps_ >= growth_interval_) {
      scale_ = std::min(kMaxScale, scale_ * 2.0);
      clean_steps_ = 0;
    }
    return true;
  }
  ++skipped_;
  clean_steps_ = 0;
  if (scale_ <= kMinScale)
    throw UserError(fmt::format("the gradients overflow fp16 even at loss scale {} (step {}): training diverged; "
                                "lower optim.lr, raise schedule.warmup_steps, or set train.precision = \"bf16\"",
                                scale_, step));
  scale_ = std::max(kMinScale, scale_ / 2.0);
  return false;
}

}  // namespace ustrain
