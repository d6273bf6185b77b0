// The light ops around block attention: the log-sum-exp merge of a block's result into the
// running one, the packing of k and v out of qkv, and of the fp32 gradient sums into dqkv, and
// the adding of a block's gradients (cuDNN's, in act) into those sums.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/attention/attention_blocks.h"
#include "kernels/cuda/cuda_check.h"

namespace ustrain::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

struct MergeGeometry {
  std::int64_t seq, q_begin, nq, out_width;
  int heads, head_dim;
};

// One warp per (b, h, r) of the block's rows; weights in double like the CPU op.
__global__ void __launch_bounds__(kThreads)
    merge_kernel(float* acc, float* lse, const float* block_out, const float* block_lse, const MergeGeometry m,
                 std::int64_t rows) {
  const std::int64_t row = std::int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;  // the whole warp leaves together
  const std::int64_t r = row % m.nq, bh = row / m.nq, h = bh % m.heads, b = bh / m.heads;
  const float lb = block_lse[row];  // block_lse (B, H, nq): row is its index
  if (lb == -INFINITY) return;      // the block had no key for this row
  float* l = lse + bh * m.seq + m.q_begin + r;
  const float la = *l;
  const float top = fmaxf(la, lb);
  const double wa = la == -INFINITY ? 0.0 : exp(static_cast<double>(la) - top);
  const double wb = exp(static_cast<double>(lb) - top);
  const double total = wa + wb;
  const auto fa = static_cast<float>(wa / total), fb = static_cast<float>(wb / total);
  float* o = acc + (b * m.seq + m.q_begin + r) * m.out_width + h * m.head_dim;   // (Dh)
  const float* ob = block_out + (b * m.nq + r) * m.out_width + h * m.head_dim;  // (Dh)
  for (int d = lane; d < m.head_dim; d += 32) o[d] = fa * o[d] + fb * ob[d];
  __syncwarp();  // every lane has read *l
  if (lane == 0) *l = static_cast<float>(top + log(total));
}

// dqkv (rows, q_width + kv_width) = [dq | dkv] rounded to T; grid-stride over elements.
template <class T>
__global__ void __launch_bounds__(kThreads)
    grad_pack_kernel(T* dqkv, const float* dq, const float* dkv, std::int64_t rows, std::int64_t q_width,
                     std::int64_t kv_width) {
  const std::int64_t width = q_width + kv_width, total = rows * width;
  for (std::int64_t idx = std::int64_t{blockIdx.x} * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t{gridDim.x} * kThreads) {
    const std::int64_t r = idx / width, c = idx - r * width;
    const float v = c < q_width ? dq[r * q_width + c] : dkv[r * kv_width + (c - q_width)];
    dqkv[idx] = from_float<T>(v);
  }
}

// dst rows += src rows; grid-stride over the elements of src (B, rows, width).
template <class T>
__global__ void __launch_bounds__(kThreads)
    add_rows_kernel(float* dst, std::int64_t dst_seq, const T* src, std::int64_t batch, std::int64_t rows,
                    std::int64_t width) {
  const std::int64_t per_batch = rows * width, total = batch * per_batch;
  for (std::int64_t idx = std::int64_t{blockIdx.x} * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t{gridDim.x} * kThreads) {
    const std::int64_t b = idx / per_batch, within = idx - b * per_batch;
    dst[b * dst_seq * width + within] += to_float(src[idx]);
  }
}

unsigned grid_for(std::int64_t items, std::int64_t per_block) {
  const std::int64_t blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

}  // namespace

void attention_kv_pack(void* kv, const void* qkv, std::int64_t rows, std::int64_t width, std::int64_t kv_width,
                       std::size_t element_bytes, cudaStream_t stream) {
  USTRAIN_ASSERT(rows >= 0 && kv_width >= 0 && kv_width <= width,
                 "attention_kv_pack: " + std::to_string(kv_width) + " columns of rows " + std::to_string(width) +
                     " wide");
  if (rows == 0 || kv_width == 0) return;
  const auto* src = static_cast<const unsigned char*>(qkv) + static_cast<std::size_t>(width - kv_width) * element_bytes;
  const std::size_t row_bytes = static_cast<std::size_t>(kv_width) * element_bytes;
  USTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(kv, row_bytes, src, static_cast<std::size_t>(width) * element_bytes, row_bytes,
                                       static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream));
}

void attention_merge(float* acc, float* lse, const float* block_out, const float* block_lse, std::int64_t batch,
                     std::int64_t seq, int heads, int head_dim, std::int64_t q_begin, std::int64_t q_count,
                     cudaStream_t stream) {
  USTRAIN_ASSERT(heads > 0 && head_dim > 0 && q_begin >= 0 && q_count >= 0 && q_begin + q_count <= seq,
                 "attention_merge: rows [" + std::to_string(q_begin) + ", " + std::to_string(q_begin + q_count) +
                     ") of " + std::to_string(seq) + ", H=" + std::to_string(heads) + ", Dh=" +
                     std::to_string(head_dim));
  const std::int64_t rows = batch * heads * q_count;
  if (rows == 0) return;
  USTRAIN_ASSERT(rows / kWarpsPerBlock < 0x7fffffff, "attention_merge: too many rows for one grid");
  const MergeGeometry m{seq, q_begin, q_count, std::int64_t{heads} * head_dim, heads, head_dim};
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  merge_kernel<<<blocks, kThreads, 0, stream>>>(acc, lse, block_out, block_lse, m, rows);
  USTRAIN_CUDA_CHECK_LAUNCH();
}

void attention_add_rows(float* dst, std::int64_t dst_seq, const void* src, DType src_type, std::int64_t batch,
                        std::int64_t rows, std::int64_t width, cudaStream_t stream) {
  USTRAIN_ASSERT(rows <= dst_seq, "attention_add_rows: " + std::to_string(rows) + " rows into " +
                                      std::to_string(dst_seq));
  const std::int64_t total = batch * rows * width;
  if (total == 0) return;
  with_float_type(
      src_type,
      [&](auto t) {
        using T = decltype(t);
        add_rows_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(dst, dst_seq, static_cast<const T*>(src),
                                                                               batch, rows, width);
        USTRAIN_CUDA_CHECK_LAUNCH();
      },
      [src_type] { return std::string("attention_add_rows: unsupported dtype ") + dtype_name(src_type); });
}

void attention_grad_pack(void* dqkv, const float* dq, const float* dkv, std::int64_t rows, std::int64_t q_width,
                         std::int64_t kv_width, DType act, cudaStream_t stream) {
  const std::int64_t total = rows * (q_width + kv_width);
  if (total == 0) return;
  with_float_type(
      act,
      [&](auto t) {
        using T = decltype(t);
        grad_pack_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(static_cast<T*>(dqkv), dq, dkv, rows,
                                                                                q_width, kv_width);
        USTRAIN_CUDA_CHECK_LAUNCH();
      },
      [act] { return std::string("attention_grad_pack: unsupported dtype ") + dtype_name(act); });
}

}  // namespace ustrain::cuda
