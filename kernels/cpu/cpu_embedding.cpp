// Embedding lookup and its scatter-add backward, whole or on one vocabulary shard.
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

void check_shapes(const char* op, const Tensor& table, const Tensor& rows, std::int64_t n, VocabShard shard) {
  USTRAIN_ASSERT(table.shape.rank() == 2, std::string(op) + ": table must be (V, D), got " + table.shape.str());
  const std::int64_t dim = table.shape.last();
  USTRAIN_ASSERT(rows.numel() == n * dim && rows.shape.last() == dim,
                 std::string(op) + ": " + rows.shape.str() + " for " + std::to_string(n) + " ids of width " +
                     std::to_string(dim));
  USTRAIN_ASSERT(shard.begin >= 0 && shard.valid >= 0 && shard.valid <= table.shape[0],
                 std::string(op) + ": a shard of " + std::to_string(shard.valid) + " rows in a table of " +
                     std::to_string(table.shape[0]));
}

// The row of `id` in the shard's table, or -1 when the id belongs to another shard.
std::int64_t row_in(std::int32_t id, VocabShard shard) {
  const std::int64_t r = static_cast<std::int64_t>(id) - shard.begin;
  return r >= 0 && r < shard.valid ? r : -1;
}

void lookup(const Tensor& out, const std::int32_t* id, const Tensor& table, VocabShard shard, int threads) {
  const std::int64_t n = out.shape.rows(), dim = table.shape.last();
  float* o = out.f32();          // (N, D)
  const float* t = table.f32();  // (Vs, D)
#pragma omp parallel for schedule(static) num_threads(threads) if (n * dim >= (1 << 15))
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = row_in(id[i], shard);
    if (r < 0)
      std::memset(o + i * dim, 0, static_cast<std::size_t>(dim) * sizeof(float));
    else
      std::memcpy(o + i * dim, t + r * dim, static_cast<std::size_t>(dim) * sizeof(float));
  }
}

void scatter_add(const Tensor& dtable, const std::int32_t* id, std::int64_t n, const Tensor& dout, VocabShard shard,
                 int threads) {
  const std::int64_t dim = dtable.shape.last();
  float* dt = dtable.f32();     // (Vs, D)
  const float* g = dout.f32();  // (N, D)
  // Repeated ids would race if rows were split across threads. Split the columns instead:
  // every element of dtable is summed over the ids in their order, whatever the thread count.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (dim + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(threads) if (blocks > 1 && n * dim >= (1 << 15))
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t c0 = b * kBlock;
    const std::int64_t width = std::min(kBlock, dim - c0);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t r = row_in(id[i], shard);
      if (r < 0) continue;
      float* row = dt + r * dim + c0;
      const float* src = g + i * dim + c0;
      for (std::int64_t c = 0; c < width; ++c) row[c] += src[c];
    }
  }
}

}  // namespace

void CpuBackend::embedding_forward(Tensor out, Tensor ids, Tensor table) {
  const VocabShard whole{0, table.shape[0]};
  check_shapes("embedding_forward", table, out, ids.numel(), whole);
  check_ids(ids.i32(), ids.numel(), table.shape[0]);
  lookup(out, ids.i32(), table, whole, threads_);
}

void CpuBackend::embedding_backward(Tensor dtable, Tensor ids, Tensor dout) {
  const VocabShard whole{0, dtable.shape[0]};
  check_shapes("embedding_backward", dtable, dout, ids.numel(), whole);
  check_ids(ids.i32(), ids.numel(), dtable.shape[0]);
  scatter_add(dtable, ids.i32(), ids.numel(), dout, whole, threads_);
}

void CpuBackend::embedding_forward_shard(Tensor out, Tensor ids, Tensor table, VocabShard shard) {
  check_shapes("embedding_forward_shard", table, out, ids.numel(), shard);
  lookup(out, ids.i32(), table, shard, threads_);
}

void CpuBackend::embedding_backward_shard(Tensor dtable, Tensor ids, Tensor dout, VocabShard shard) {
  check_shapes("embedding_backward_shard", dtable, dout, ids.numel(), shard);
  scatter_add(dtable, ids.i32(), ids.numel(), dout, shard, threads_);
}

}  // namespace ustrain
