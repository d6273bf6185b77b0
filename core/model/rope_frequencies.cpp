#include "core/model/rope_frequencies.h"

#include <cmath>
#include <numbers>

#include "kernels/error.h"

namespace ustrain {

std::vector<double> rope_inverse_frequencies(const ModelSection& model, std::int64_t head_dim) {
  USTRAIN_ASSERT(head_dim > 0 && head_dim % 2 == 0, "rope head_dim must be even, got " + std::to_string(head_dim));
  const std::int64_t half = head_dim / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    inv_freq[static_cast<std::size_t>(i)] = std::pow(model.rope_theta, -static_cast<double>(i) / static_cast<double>(half));
  if (model.rope_scaling == "none") return inv_freq;
  USTRAIN_ASSERT(model.rope_scaling == "llama3", "unknown rope scaling " + model.rope_scaling);

  const double original = static_cast<double>(model.rope_original_max_seq_len);
  const double factor = model.rope_scaling_factor;
  const double low = model.rope_low_freq_factor, high = model.rope_high_freq_factor;
  for (double& freq : inv_freq) {
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < original / high) continue;
    if (wavelen > original / low) {
      freq /= factor;
      continue;
    }
    const double smooth = (original / wavelen - low) / (high - low);
    freq = (1.0 - smooth) * freq / factor + smooth * freq;
  }
  return inv_freq;
}

}  // namespace ustrain
