// Embedding lookup and its scatter-add backward.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"

namespace ustrain {
namespace {

void check_ids(const std::int32_t* ids, std::int64_t n, std::int64_t vocab) {
  for (std::int64_t i = 0; i < n; ++i)
    USTRAIN_ASSERT(ids[i] >= 0 && ids[i] < vocab,
                   "token id " + std::to_string(ids[i]) + " outside the vocabulary of " + std::to_string(vocab));
}

}  // namespace

void CpuBackend::embedding_forward(Tensor out, Tensor ids, Tensor table) {
  const std::int64_t n = ids.numel();
  const std::int64_t vocab = table.shape[0];
  const std::int64_t dim = table.shape.last();
  USTRAIN_ASSERT(table.shape.rank() == 2, "table must be (V, D), got " + table.shape.str());
  USTRAIN_ASSERT(out.numel() == n * dim && out.shape.last() == dim,
                 "out " + out.shape.str() + " for " + std::to_string(n) + " ids of width " + std::to_string(dim));
  const std::int32_t* id = ids.i32();
  check_ids(id, n, vocab);
  float* o = out.f32();          // (N, D)
  const float* t = table.f32();  // (V, D)
#pragma omp parallel for schedule(static) num_threads(threads_) if (n * dim >= (1 << 15))
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(o + i * dim, t + static_cast<std::int64_t>(id[i]) * dim, static_cast<std::size_t>(dim) * sizeof(float));
}

void CpuBackend::embedding_backward(Tensor dtable, Tensor ids, Tensor dout) {
  const std::int64_t n = ids.numel();
  const std::int64_t vocab = dtable.shape[0];
  const std::int64_t dim = dtable.shape.last();
  USTRAIN_ASSERT(dtable.shape.rank() == 2, "dtable must be (V, D), got " + dtable.shape.str());
  USTRAIN_ASSERT(dout.numel() == n * dim && dout.shape.last() == dim,
                 "dout " + dout.shape.str() + " for " + std::to_string(n) + " ids of width " + std::to_string(dim));
  const std::int32_t* id = ids.i32();
  check_ids(id, n, vocab);
  float* dt = dtable.f32();     // (V, D)
  const float* g = dout.f32();  // (N, D)

  // Repeated ids would race if rows were split across threads. Split the columns instead:
  // every element of dtable is summed over the ids in their order, whatever the thread count.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (dim + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(threads_) if (blocks > 1 && n * dim >= (1 << 15))
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t c0 = b * kBlock;
    const std::int64_t width = std::min(kBlock, dim - c0);
    for (std::int64_t i = 0; i < n; ++i) {
      float* row = dt + static_cast<std::int64_t>(id[i]) * dim + c0;
      const float* src = g + i * dim + c0;
      for (std::int64_t c = 0; c < width; ++c) row[c] += src[c];
    }
  }
}

}  // namespace ustrain
