// Fused softmax cross-entropy over rows of logits: never stores the probabilities.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

void check_targets(const std::int32_t* t, std::int64_t n, std::int64_t vocab) {
  for (std::int64_t i = 0; i < n; ++i)
    USTRAIN_ASSERT(t[i] < vocab,
                   "target " + std::to_string(t[i]) + " outside the vocabulary of " + std::to_string(vocab));
}

}  // namespace

void CpuBackend::cross_entropy_forward(Tensor losses, Tensor lse, Tensor logits, Tensor targets) {
  const std::int64_t rows = logits.shape.rows();
  const std::int64_t vocab = logits.shape.last();
  USTRAIN_ASSERT(vocab > 0, "empty vocabulary");
  USTRAIN_ASSERT(losses.numel() == rows && lse.numel() == rows && targets.numel() == rows,
                 "losses " + losses.shape.str() + ", lse " + lse.shape.str() + ", targets " + targets.shape.str() +
                     " for logits " + logits.shape.str());
  const std::int32_t* t = targets.i32();  // (N)
  check_targets(t, rows, vocab);
  float* loss = losses.f32();     // (N)
  float* l = lse.f32();           // (N)
  const float* z = logits.f32();  // (N, V)
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * vocab >= (1 << 15))
  for (std::int64_t n = 0; n < rows; ++n) {
    if (t[n] < 0) {
      loss[n] = 0.0f;
      l[n] = 0.0f;
      continue;
    }
    const float* zr = z + n * vocab;
    const float m = cpu::max_of(zr, vocab);
    const double row_lse = m + std::log(cpu::sum_exp(zr, vocab, m));
    l[n] = static_cast<float>(row_lse);
    loss[n] = static_cast<float>(row_lse - zr[t[n]]);
  }
}

void CpuBackend::cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss) {
  const std::int64_t rows = logits.shape.rows();
  const std::int64_t vocab = logits.shape.last();
  USTRAIN_ASSERT(dlogits.shape == logits.shape, "dlogits " + dlogits.shape.str() + " vs " + logits.shape.str());
  USTRAIN_ASSERT(lse.numel() == rows && targets.numel() == rows,
                 "lse " + lse.shape.str() + ", targets " + targets.shape.str() + " for logits " + logits.shape.str());
  const std::int32_t* t = targets.i32();  // (N)
  check_targets(t, rows, vocab);
  float* d = dlogits.f32();       // (N, V), may alias logits
  const float* z = logits.f32();  // (N, V)
  const float* l = lse.f32();     // (N)
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * vocab >= (1 << 15))
  for (std::int64_t n = 0; n < rows; ++n) {
    float* dr = d + n * vocab;
    if (t[n] < 0) {
      for (std::int64_t v = 0; v < vocab; ++v) dr[v] = 0.0f;
      continue;
    }
    const float* zr = z + n * vocab;
    const float row_lse = l[n];
    for (std::int64_t v = 0; v < vocab; ++v) dr[v] = cpu::fast_exp(zr[v] - row_lse) * dloss;
    dr[t[n]] -= dloss;
  }
}

}  // namespace ustrain
