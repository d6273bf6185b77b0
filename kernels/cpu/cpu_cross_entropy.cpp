// Fused softmax cross-entropy over rows of logits: never stores the probabilities. Whole
// rows, or (vocabulary-parallel) one shard of every row's columns plus the combination of the
// shards' statistics.
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

void check_targets(const std::int32_t* t, std::int64_t n, std::int64_t vocab) {
  for (std::int64_t i = 0; i < n; ++i)
    USTRAIN_ASSERT(t[i] < vocab,
                   "target " + std::to_string(t[i]) + " outside the vocabulary of " + std::to_string(vocab));
}

void check_shard(const char* op, std::int64_t width, VocabShard shard) {
  USTRAIN_ASSERT(shard.begin >= 0 && shard.valid >= 0 && shard.valid <= width,
                 std::string(op) + ": a shard of " + std::to_string(shard.valid) + " columns in logits of width " +
                     std::to_string(width));
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
  const std::int64_t vocab = logits.shape.last();
  USTRAIN_ASSERT(targets.numel() == logits.shape.rows(),
                 "targets " + targets.shape.str() + " for logits " + logits.shape.str());
  check_targets(targets.i32(), targets.numel(), vocab);
  // The whole vocabulary is one shard of every column: the same operations, so the same bits.
  CpuBackend::cross_entropy_backward_shard(dlogits, logits, lse, targets, dloss, VocabShard{0, vocab});
}

void CpuBackend::cross_entropy_shard_stats(Tensor stats, Tensor logits, Tensor targets, VocabShard shard) {
  const std::int64_t rows = logits.shape.rows();
  const std::int64_t width = logits.shape.last();
  check_shard("cross_entropy_shard_stats", width, shard);
  USTRAIN_ASSERT(stats.numel() == 2 * rows && targets.numel() == rows,
                 "stats " + stats.shape.str() + ", targets " + targets.shape.str() + " for logits " + logits.shape.str());
  const std::int32_t* t = targets.i32();  // (N)
  float* lse = stats.f32();               // (2, N): row 0
  float* target_logit = lse + rows;       //         row 1
  const float* z = logits.f32();          // (N, Vs)
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * width >= (1 << 15))
  for (std::int64_t n = 0; n < rows; ++n) {
    lse[n] = target_logit[n] = 0.0f;
    if (t[n] < 0) continue;
    const float* zr = z + n * width;
    if (shard.valid == 0) {
      lse[n] = -std::numeric_limits<float>::infinity();
      continue;
    }
    const float m = cpu::max_of(zr, shard.valid);
    lse[n] = static_cast<float>(m + std::log(cpu::sum_exp(zr, shard.valid, m)));
    const std::int64_t local = static_cast<std::int64_t>(t[n]) - shard.begin;
    if (local >= 0 && local < shard.valid) target_logit[n] = zr[local];
  }
}

void CpuBackend::cross_entropy_combine(Tensor losses, Tensor lse, Tensor parts, Tensor targets) {
  const std::int64_t rows = targets.numel();
  USTRAIN_ASSERT(rows > 0 && parts.numel() % (2 * rows) == 0 && losses.numel() == rows && lse.numel() == rows,
                 "cross_entropy_combine: parts " + parts.shape.str() + ", losses " + losses.shape.str() + ", lse " +
                     lse.shape.str() + " for " + std::to_string(rows) + " targets");
  const std::int64_t shards = parts.numel() / (2 * rows);
  const std::int32_t* t = targets.i32();
  const float* p = parts.f32();  // (P, 2, N)
  float* loss = losses.f32();
  float* l = lse.f32();
  for (std::int64_t n = 0; n < rows; ++n) {
    if (t[n] < 0) {
      loss[n] = l[n] = 0.0f;
      continue;
    }
    double m = -std::numeric_limits<double>::infinity(), target_logit = 0;
    for (std::int64_t s = 0; s < shards; ++s) {
      m = std::max(m, static_cast<double>(p[(2 * s) * rows + n]));
      target_logit += p[(2 * s + 1) * rows + n];  // one shard holds the target, the others add 0
    }
    double sum = 0;
    for (std::int64_t s = 0; s < shards; ++s) sum += std::exp(p[(2 * s) * rows + n] - m);
    const double row_lse = m + std::log(sum);
    l[n] = static_cast<float>(row_lse);
    loss[n] = static_cast<float>(row_lse - target_logit);
  }
}

void CpuBackend::cross_entropy_backward_shard(Tensor dlogits, Tensor logits, Tensor lse, Tensor targets, float dloss,
                                              VocabShard shard) {
  const std::int64_t rows = logits.shape.rows();
  const std::int64_t width = logits.shape.last();
  check_shard("cross_entropy_backward_shard", width, shard);
  USTRAIN_ASSERT(dlogits.shape == logits.shape, "dlogits " + dlogits.shape.str() + " vs " + logits.shape.str());
  USTRAIN_ASSERT(lse.numel() == rows && targets.numel() == rows,
                 "lse " + lse.shape.str() + ", targets " + targets.shape.str() + " for logits " + logits.shape.str());
  const std::int32_t* t = targets.i32();  // (N)
  float* d = dlogits.f32();               // (N, Vs), may alias logits
  const float* z = logits.f32();          // (N, Vs)
  const float* l = lse.f32();             // (N)
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * width >= (1 << 15))
  for (std::int64_t n = 0; n < rows; ++n) {
    float* dr = d + n * width;
    const std::int64_t valid = t[n] < 0 ? 0 : shard.valid;
    const float* zr = z + n * width;
    const float row_lse = l[n];
    for (std::int64_t v = 0; v < valid; ++v) dr[v] = cpu::fast_exp(zr[v] - row_lse) * dloss;
    for (std::int64_t v = valid; v < width; ++v) dr[v] = 0.0f;
    const std::int64_t local = static_cast<std::int64_t>(t[n]) - shard.begin;
    if (t[n] >= 0 && local >= 0 && local < shard.valid) dr[local] -= dloss;
  }
}

}  // namespace ustrain
