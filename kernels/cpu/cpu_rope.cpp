// Rotary position embedding in the rotate-half layout (Hugging Face Llama): within each head,
// element i pairs with element i + Dh/2 and the pair turns by pos * inv_freq[i] (without
// frequency scaling inv_freq[i] = theta^(-2i/Dh); core/model/rope_frequencies.h).
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"

namespace ustrain {

void CpuBackend::rope_tables(Tensor cos, Tensor sin, std::span<const double> inv_freq, std::int64_t first_position) {
  USTRAIN_ASSERT(cos.shape.rank() == 2 && sin.shape == cos.shape,
                 "rope tables must be (S, Dh/2), got " + cos.shape.str() + " and " + sin.shape.str());
  const std::int64_t positions = cos.shape[0];
  const std::int64_t half = cos.shape[1];
  USTRAIN_ASSERT(static_cast<std::int64_t>(inv_freq.size()) == half,
                 std::to_string(inv_freq.size()) + " rope frequencies for tables " + cos.shape.str());
  float* c = cos.f32();  // (S, Dh/2)
  float* s = sin.f32();  // (S, Dh/2)
  for (std::int64_t pos = 0; pos < positions; ++pos) {
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(first_position + pos) * inv_freq[static_cast<std::size_t>(i)];
      c[pos * half + i] = static_cast<float>(std::cos(angle));
      s[pos * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void CpuBackend::rope_forward(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  rope_apply(qkv, cos, sin, rotated_heads, head_dim, /*inverse=*/false);
}

void CpuBackend::rope_backward(Tensor dqkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim) {
  // A rotation's gradient is the rotation by the opposite angle.
  rope_apply(dqkv, cos, sin, rotated_heads, head_dim, /*inverse=*/true);
}

void CpuBackend::rope_apply(Tensor qkv, Tensor cos, Tensor sin, int rotated_heads, int head_dim, bool inverse) {
  USTRAIN_ASSERT(qkv.shape.rank() == 3, "qkv must be (B, S, W), got " + qkv.shape.str());
  const std::int64_t batch = qkv.shape[0];
  const std::int64_t seq = qkv.shape[1];
  const std::int64_t width = qkv.shape[2];
  const std::int64_t half = head_dim / 2;
  USTRAIN_ASSERT(head_dim > 0 && head_dim % 2 == 0, "rope head_dim must be even, got " + std::to_string(head_dim));
  USTRAIN_ASSERT(rotated_heads >= 0 && rotated_heads * static_cast<std::int64_t>(head_dim) <= width,
                 std::to_string(rotated_heads) + " heads of " + std::to_string(head_dim) + " exceed row width " +
                     std::to_string(width));
  USTRAIN_ASSERT(cos.shape.rank() == 2 && sin.shape == cos.shape && cos.shape[1] == half,
                 "rope tables " + cos.shape.str() + " for head_dim " + std::to_string(head_dim));
  USTRAIN_ASSERT(cos.shape[0] >= seq,
                 "rope tables cover " + std::to_string(cos.shape[0]) + " positions, need " + std::to_string(seq));
  float* data = qkv.f32();      // (B, S, W)
  const float* ct = cos.f32();  // (S_max, Dh/2)
  const float* st = sin.f32();  // (S_max, Dh/2)
  const float sign = inverse ? -1.0f : 1.0f;
  const std::int64_t rows = batch * seq;
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * rotated_heads * head_dim >= (1 << 15))
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t pos = row % seq;
    const float* c = ct + pos * half;
    const float* s = st + pos * half;
    for (int h = 0; h < rotated_heads; ++h) {
      float* x1 = data + row * width + static_cast<std::int64_t>(h) * head_dim;
      float* x2 = x1 + half;
      for (std::int64_t i = 0; i < half; ++i) {
        const float a = x1[i], b = x2[i], si = sign * s[i];
        x1[i] = a * c[i] - b * si;
        x2[i] = b * c[i] + a * si;
      }
    }
  }
}

}  // namespace ustrain
