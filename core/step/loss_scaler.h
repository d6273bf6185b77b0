// Dynamic loss scaling for fp16 training.
//
// fp16 holds magnitudes down to about 6e-8: small activation gradients would flush to zero.
// The loss gradient is multiplied by `scale` before backward and the parameter gradients are
// divided by it before the optimizer. When a step's gradients overflow (inf or nan), the step
// is skipped and the scale halves; after `growth_interval` clean steps in a row it doubles, up to
// kMaxLossScale (a scale that grew without bound would reach infinity, and an infinite scale
// halves to itself: every step would be skipped).
// bf16 and fp32 have fp32's range and use no scaling (the scale stays 1).
#pragma once

#include <cstdint>

#include "core/recipe/recipe.h"

namespace ustrain {

class LossScaler {
 public:
  static constexpr double kInitialScale = 65536.0;  // 2^16
  static constexpr std::int64_t kGrowthInterval = 2000;
  // Overflow at the smallest scale means the model itself diverged, not fp16's range.
  static constexpr double kMinScale = 1.0;
  static constexpr double kMaxScale = kMaxLossScale;

  explicit LossScaler(bool enabled, double initial = kInitialScale, std::int64_t growth_interval = kGrowthInterval);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  // Reports whether this step's gradients were all finite; returns whether to apply the step.
  // Throws UserError when gradients overflow even at kMinScale.
  bool update(bool gradients_finite, std::int64_t step);
  std::int64_t skipped_steps() const { return skipped_; }
  // Continues a resumed run at the scale its checkpoint recorded (its run of clean steps
  // starts again).
  void restore(double scale);

 private:
  bool enabled_;
  double scale_;
  std::int64_t growth_interval_;
  std::int64_t clean_steps_ = 0;
  std::int64_t skipped_ = 0;
};

}  // namespace ustrain
