// Attention of a block of query rows against a block of key rows on CUDA cores, flash-attention
// style: tiles of kTile query rows meet tiles of kTile key rows in shared memory (fp32), so
// nothing of size S^2 is ever stored. The keys are packed kv rows or qkv's own (a self block:
// the whole sequence on one rank), the mask a value (causal aligned at the blocks' ends, a
// window, document ids: attention_block_mask.cuh), and tiles with no pair the mask allows are
// skipped. Packed blocks give fp32 results; a self block may give its results in the activation
// dtype. The backward: attention_block_backward.cu; what both share:
// attention_block_geometry.cuh; thread layout and tile helpers: attention_tiles.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/attention/attention_block_geometry.cuh"

namespace ustrain::cuda {
namespace block_kernels {
namespace {

// Grid (query tiles, H, B). kDh >= head_dim; out in TO (fp32, or T). kv: the keys' first column.
template <class T, class TO, int kDh>
__global__ void __launch_bounds__(kThreads)
    block_forward_kernel(TO* out, float* lse, const T* qkv, const T* kv, const BlockGeometry g) {
  constexpr int kAcc = kDh / kLanesPerRow;
  extern __shared__ float smem[];
  float* q_tile = smem;                   // (kTile, ld)
  float* k_tile = q_tile + kTile * g.ld;  // (kTile, ld)
  float* v_tile = k_tile + kTile * g.ld;  // (kTile, ld)
  float* p_tile = v_tile + kTile * g.ld;  // (kTile, kScoreLd)

  __shared__ DocumentTile q_docs, k_docs;

  const QueryTileThread t = query_tile_thread(g);
  const T* keys = kv + g.key_offset(t.b, t.kv);  // (nk, Dh), row stride kv_stride
  if (g.mask.has_documents())
    load_documents(q_docs, g.mask.q_documents, g.mask.q_documents_stride, t.b, t.i0, g.nq);

  load_tile(q_tile, qkv + g.query_offset(t.b, t.h, g.width), g.width, t.i0, g.nq, g);
  float acc[kAcc] = {};  // (Dh) of row i: sum_j exp(s_ij - max) v_j
  float running_max = -INFINITY, running_sum = 0.0f;
  for (std::int64_t j0 = t.key_begin; j0 < t.tile_keys; j0 += kTile) {
    if (!key_tile_may_be_seen(k_docs, q_docs, t, j0, g)) continue;
    load_key_tiles(k_tile, v_tile, keys, j0, g);

    float s[kColsPerLane] = {};
    for (int d = 0; d < g.head_dim; ++d) {
      const float q = q_tile[t.r * g.ld + d];
#pragma unroll
      for (int c = 0; c < kColsPerLane; ++c) s[c] += q * k_tile[(t.lane + c * kLanesPerRow) * g.ld + d];
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const int col = t.lane + c * kLanesPerRow;
      s[c] = sees(g.mask, t.i, j0 + col, q_docs, t.r, k_docs, col) ? s[c] * g.scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    const float new_max = fmaxf(running_max, row_max(tile_max));
    const float shift = new_max == -INFINITY ? 0.0f : new_max;  // avoids -inf - -inf
    const float rescale = expf(running_max - shift);
    float tile_sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const float p = expf(s[c] - shift);
      p_tile[t.r * kScoreLd + t.lane + c * kLanesPerRow] = p;
      tile_sum += p;
    }
    running_sum = running_sum * rescale + row_sum(tile_sum);
    running_max = new_max;
    __syncthreads();  // p_tile complete

#pragma unroll
    for (int a = 0; a < kAcc; ++a) acc[a] *= rescale;
    add_weighted_rows(acc, p_tile + t.r * kScoreLd, v_tile, t.lane, g);
  }
  if (t.i >= g.nq) return;
  // A row that saw a key has running_sum >= 1 (its largest term is exp(0)); one that saw none
  // gets out 0 and lse -inf.
  const bool saw_keys = running_sum > 0.0f;
  TO* o = out + (t.b * g.nq + t.i) * g.out_width + std::int64_t{t.h} * g.head_dim;  // (Dh)
  store_row(o, acc, t.lane, g, [running_sum, saw_keys](float x) { return saw_keys ? x / running_sum : 0.0f; });
  if (t.lane == 0)
    lse[(t.b * g.heads + t.h) * g.nq + t.i] = saw_keys ? running_max + logf(running_sum) : -INFINITY;
}

}  // namespace

std::string describe(const char* op, DType act, const AttentionBlock& a) {
  return std::string(op) + " (" + dtype_name(act) + "): query rows [" + std::to_string(a.q_begin) + ", " +
         std::to_string(a.q_begin + a.q_count) + ") of " + std::to_string(a.q_seq) + ", key rows [" +
         std::to_string(a.k_begin) + ", " + std::to_string(a.k_begin + a.k_count) + ") of " +
         std::to_string(a.kv_seq) + (a.self ? " (its own)" : "") + ", B=" + std::to_string(a.batch) +
         ", H=" + std::to_string(a.heads) + ", Hkv=" + std::to_string(a.kv_heads) +
         ", Dh=" + std::to_string(a.head_dim) + (a.causal ? ", causal" : ", no order") +
         (a.window > 0 ? ", window " + std::to_string(a.window) + " at diagonal " + std::to_string(a.diagonal) : "") +
         (a.has_documents() ? ", documents" : "");
}

BlockGeometry geometry(const char* op, DType act, const AttentionBlock& a) {
  const std::string what = describe(op, act, a);
  USTRAIN_ASSERT(is_float_type(act), what + ": unsupported dtype");
  USTRAIN_ASSERT(a.batch >= 0 && a.q_seq >= 0 && a.kv_seq >= 0, what + ": negative size");
  USTRAIN_ASSERT(!a.self || a.kv_seq == a.q_seq, what + ": a self block's keys are its query rows'");
  USTRAIN_ASSERT(a.q_begin >= 0 && a.q_count >= 0 && a.q_begin + a.q_count <= a.q_seq && a.k_begin >= 0 &&
                     a.k_count >= 0 && a.k_begin + a.k_count <= a.kv_seq,
                 what + ": a range lies outside its sequence");
  USTRAIN_ASSERT(a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0, what + ": H must be a multiple of Hkv");
  USTRAIN_ASSERT(a.head_dim >= 1 && a.head_dim <= kMaxHeadDim,
                 what + ": head_dim must lie in [1, " + std::to_string(kMaxHeadDim) + "]");
  USTRAIN_ASSERT(a.batch <= 65535 && a.heads <= 65535, what + ": B and H must fit a grid dimension (65535)");
  USTRAIN_ASSERT(a.window >= 0, what + ": negative window");
  USTRAIN_ASSERT((a.q_documents == nullptr) == (a.k_documents == nullptr),
                 what + ": document ids for both the query and the key rows, or for neither");
  USTRAIN_ASSERT(a.q_count / kTile < 0x7fffffff && a.k_count / kTile < 0x7fffffff, what + ": too many tiles");
  BlockGeometry g{};
  g.q_seq = a.q_seq;
  g.kv_seq = a.kv_seq;
  g.q_begin = a.q_begin;
  g.k_begin = a.k_begin;
  g.nq = a.q_count;
  g.nk = a.k_count;
  g.heads = a.heads;
  g.kv_heads = a.kv_heads;
  g.group = a.heads / a.kv_heads;
  g.head_dim = a.head_dim;
  g.width = std::int64_t{a.heads + 2 * a.kv_heads} * a.head_dim;
  g.out_width = std::int64_t{a.heads} * a.head_dim;
  g.kv_stride = a.self ? g.width : std::int64_t{2 * a.kv_heads} * a.head_dim;
  g.dq_stride = a.self ? g.width : g.out_width;
  g.ld = tile_ld(a.head_dim);
  g.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.head_dim)));
  g.mask = {{a.q_count, a.k_count, a.causal, a.window, a.diagonal}, a.q_documents, a.k_documents,
            a.q_documents_stride, a.k_documents_stride};
  g.accumulate = !a.self;
  return g;
}

}  // namespace block_kernels

using namespace block_kernels;

void attention_block_forward(void* out, DType out_type, float* lse, const void* qkv, const void* kv,
                             const AttentionBlock& a, DType act, cudaStream_t stream) {
  const char* op = "attention_block_forward";
  const BlockGeometry g = geometry(op, act, a);
  if (a.batch == 0 || a.q_count == 0) return;
  tiles::with_kind(act, a.head_dim, op, [&](auto kind) {
    using T = typename decltype(kind)::type;
    constexpr int kDh = decltype(kind)::head_dim_bound;
    with_result_type<T>(out_type, act, describe(op, act, a) + ": out", [&](auto result) {
      using TO = decltype(result);
      const std::size_t smem = forward_smem_bytes(g.ld);
      allow_shared_memory(block_forward_kernel<T, TO, kDh>, smem, g.head_dim, op);
      const dim3 grid(tile_count(a.q_count), static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
      block_forward_kernel<T, TO, kDh><<<grid, kThreads, smem, stream>>>(
          static_cast<TO*>(out), lse, static_cast<const T*>(qkv), keys_of<T>(qkv, kv, a), g);
      USTRAIN_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace ustrain::cuda
