// Embedding kernels (see embedding.h).
//
// Backward without float atomics: sort the (id, position) pairs by id with a stable radix
// sort, so every id's positions form one run in increasing order; then each run is summed
// into its table row by exactly one block per column tile, in position order.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/scratch_sizes.h"

namespace ustrain::cuda {
namespace {

constexpr int kMaxRowThreads = 256;
constexpr std::int64_t kMaxRowBlocks = std::int64_t{1} << 20;  // rows beyond are strided
constexpr int kScatterThreads = 256;                           // table columns per scatter block
constexpr std::int64_t kSegment = 32;                          // sorted positions per scatter block
constexpr std::int64_t kElementsPerThread = 4;                 // for the grid-stride prepare kernel
constexpr std::size_t kAlign = 256;

// out (n, D) = table (V, D)[ids - begin]; zeros where an id is outside [begin, begin + V).
// N elements per pack.
template <class T, int N>
__global__ void embedding_forward_kernel(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                                         std::int64_t begin, std::int64_t vocab, std::int64_t dim) {
  const std::int64_t packs = dim / N;
  for (std::int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const std::int64_t id = static_cast<std::int64_t>(ids[row]) - begin;
    auto* o = reinterpret_cast<Pack<T, N>*>(out + row * dim);
    if (id < 0 || id >= vocab) {
      Pack<T, N> zero;
#pragma unroll
      for (int k = 0; k < N; ++k) zero.v[k] = from_float<T>(0.0f);
      for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) o[p] = zero;
      continue;
    }
    const auto* src = reinterpret_cast<const Pack<T, N>*>(table + static_cast<std::int64_t>(id) * dim);
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) o[p] = src[p];
  }
}

// The sort's input: keys = ids - begin, with every id outside the table replaced by `vocab`
// (it then sorts after all real ids); values = positions 0..n-1.
__global__ void embedding_sort_input_kernel(std::uint32_t* keys, std::int32_t* positions, const std::int32_t* ids,
                                            std::int64_t n, std::int64_t begin, std::int64_t vocab) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::int64_t id = static_cast<std::int64_t>(ids[i]) - begin;
    keys[i] = static_cast<std::uint32_t>(id >= 0 && id < vocab ? id : vocab);
    positions[i] = static_cast<std::int32_t>(i);
  }
}

// The first index k >= from with keys[k] != id, or n. Every thread of the block calls it
// with the same arguments and gets the same answer; `scratch` is one shared int.
__device__ std::int64_t run_end(const std::uint32_t* keys, std::int64_t from, std::int64_t n, std::uint32_t id,
                                int* scratch) {
  const int none = static_cast<int>(blockDim.x);
  for (std::int64_t base = from;; base += blockDim.x) {
    const std::int64_t k = base + threadIdx.x;
    const bool differs = k >= n || keys[k] != id;
    if (threadIdx.x == 0) *scratch = none;
    __syncthreads();
    if (differs) atomicMin(scratch, static_cast<int>(threadIdx.x));
    __syncthreads();
    const int first = *scratch;
    __syncthreads();  // everyone has read it before thread 0 resets it
    if (first != none) return base + first;
  }
}

// dtable (V, D) += dout (n, D) at the sorted ids. Block (x, y) takes the runs that START
// among sorted positions [x * kSegment, (x + 1) * kSegment), following each to its end, for
// columns [y * blockDim, (y + 1) * blockDim); so every (run, column) has exactly one owner.
// The table is fp32 (parameter gradients) or T (the row scatters of a mixture of experts, whose
// rows land in activation buffers): each cell's rows are summed in fp32 and rounded once.
template <class T, class Table>
__global__ void embedding_scatter_kernel(Table* dtable, const std::uint32_t* keys, const std::int32_t* positions,
                                         const T* dout, std::int64_t n, std::int64_t vocab, std::int64_t dim) {
  __shared__ int scratch;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const bool active = c < dim;  // idle threads still take part in run_end's barriers
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kSegment;
  const std::int64_t end = begin + kSegment < n ? begin + kSegment : n;

  // Skip the rest of a run that started in an earlier segment: its owner is that block.
  std::int64_t j = begin;
  if (j > 0 && keys[j] == keys[j - 1]) j = run_end(keys, j, n, keys[j], &scratch);

  while (j < end) {
    const std::uint32_t id = keys[j];
    if (id >= vocab) break;  // out-of-range ids sort last; they are skipped
    // Most runs are one position long: test the next key before searching.
    const std::int64_t stop =
        j + 1 >= n || keys[j + 1] != id ? j + 1 : run_end(keys, j + 1, n, id, &scratch);
    if (active) {
      Table* cell = dtable + static_cast<std::int64_t>(id) * dim + c;
      float acc = to_float(*cell);
#pragma unroll 8
      for (std::int64_t k = j; k < stop; ++k) acc += to_float(dout[static_cast<std::int64_t>(positions[k]) * dim + c]);
      *cell = from_float<Table>(acc);
    }
    j = stop;
  }
}

std::size_t round_up(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::string describe(const char* op, DType act, std::int64_t n, std::int64_t vocab, std::int64_t dim) {
  return std::string(op) + ": " + dtype_name(act) + " table (" + std::to_string(vocab) + ", " + std::to_string(dim) +
         ") with " + std::to_string(n) + " ids";
}

// Bits that hold every key, including the out-of-range key `vocab`.
int key_bits(std::int64_t vocab) {
  int bits = 1;
  while ((vocab >> bits) != 0) ++bits;
  return bits;
}

// Radix sort temporary storage for n pairs over `bits` key bits (no work, no launch).
std::size_t sort_temp_bytes(std::int64_t n, int bits) {
  std::size_t bytes = 0;
  USTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), static_cast<int>(n), 0, bits));
  return bytes;
}

// The workspace, in order: keys in/out (n u32 each), positions in/out (n i32 each), the
// sort's temporary storage; every part 256-byte aligned, after kAlign bytes of slack for
// aligning the base. Sized without the device (kernels/cuda/scratch_sizes.h): the sort's
// storage is a bound that every call checks CUB's own figure against.
struct Workspace {
  std::size_t array_bytes;  // one of the four arrays, rounded up
  std::size_t temp_bytes;   // sort storage reserved
  std::size_t total() const { return kAlign + 4 * array_bytes + temp_bytes; }
};

Workspace workspace_for(std::int64_t n) {
  static_assert(kAlign == kScratchAlign);
  return {embedding_array_bytes(n), round_up(embedding_sort_temp_bound(n))};
}

}  // namespace

void embedding_forward(void* out, const std::int32_t* ids, const void* table, std::int64_t n, std::int64_t vocab,
                       std::int64_t dim, DType act, cudaStream_t stream, std::int64_t begin) {
  USTRAIN_ASSERT(is_float_type(act) && n >= 0 && vocab >= 0 && dim >= 0,
                 describe("embedding_forward", act, n, vocab, dim) + ": unsupported dtype or shape");
  if (n == 0 || dim == 0) return;
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kPack = 16 / sizeof(T);
    const bool packed = dim % kPack == 0 && aligned16(out) && aligned16(table);
    const std::int64_t packs = packed ? dim / kPack : dim;
    const int threads = static_cast<int>(std::clamp<std::int64_t>((packs + 31) / 32 * 32, 32, kMaxRowThreads));
    const auto blocks = static_cast<unsigned>(std::min(n, kMaxRowBlocks));
    auto* o = static_cast<T*>(out);
    const auto* t = static_cast<const T*>(table);
    if (packed)
      embedding_forward_kernel<T, kPack><<<blocks, threads, 0, stream>>>(o, ids, t, n, begin, vocab, dim);
    else
      embedding_forward_kernel<T, 1><<<blocks, threads, 0, stream>>>(o, ids, t, n, begin, vocab, dim);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

std::size_t embedding_backward_workspace_bytes(std::int64_t n) {
  USTRAIN_ASSERT(n >= 0 && n <= std::numeric_limits<std::int32_t>::max(),
                 "embedding_backward: " + std::to_string(n) + " ids do not fit 32-bit positions");
  const std::size_t bytes = n == 0 ? 0 : workspace_for(n).total();
  USTRAIN_ASSERT(bytes == embedding_backward_scratch_bytes(n), "embedding_backward: workspace layout and its size differ");
  return bytes;
}

void embedding_backward(void* dtable, DType table_dtype, const std::int32_t* ids, const void* dout, std::int64_t n,
                        std::int64_t vocab, std::int64_t dim, DType act, void* workspace, cudaStream_t stream,
                        std::int64_t begin) {
  USTRAIN_ASSERT(is_float_type(act) && (table_dtype == DType::f32 || table_dtype == act) && n >= 0 && n <= std::numeric_limits<std::int32_t>::max() && vocab >= 0 &&
                     vocab <= std::numeric_limits<std::int32_t>::max() && dim >= 0 &&
                     (dim + kScatterThreads - 1) / kScatterThreads <= 65535,
                 describe("embedding_backward", act, n, vocab, dim) + ": unsupported dtype or shape");
  if (n == 0 || dim == 0 || vocab == 0) return;
  USTRAIN_ASSERT(workspace != nullptr, describe("embedding_backward", act, n, vocab, dim) + ": no workspace");

  const Workspace layout = workspace_for(n);
  const auto base = (reinterpret_cast<std::uintptr_t>(workspace) + kAlign - 1) / kAlign * kAlign;
  auto* keys_in = reinterpret_cast<std::uint32_t*>(base);
  auto* keys_out = reinterpret_cast<std::uint32_t*>(base + layout.array_bytes);
  auto* positions_in = reinterpret_cast<std::int32_t*>(base + 2 * layout.array_bytes);
  auto* positions_out = reinterpret_cast<std::int32_t*>(base + 3 * layout.array_bytes);
  void* temp = reinterpret_cast<void*>(base + 4 * layout.array_bytes);

  const std::int64_t prepare_blocks =
      std::clamp<std::int64_t>((n + 256 * kElementsPerThread - 1) / (256 * kElementsPerThread), 1, 4096);
  embedding_sort_input_kernel<<<static_cast<unsigned>(prepare_blocks), 256, 0, stream>>>(keys_in, positions_in, ids,
                                                                                        n, begin, vocab);
  USTRAIN_CUDA_CHECK_LAUNCH();

  // Only the bits that can be set: fewer radix passes than all 32.
  const int bits = key_bits(vocab);
  std::size_t temp_bytes = sort_temp_bytes(n, bits);
  USTRAIN_ASSERT(temp_bytes <= layout.temp_bytes, "embedding_backward: the radix sort of " + std::to_string(n) +
                                                      " ids needs " + std::to_string(temp_bytes) +
                                                      " bytes of storage, above the planned bound of " +
                                                      std::to_string(layout.temp_bytes) +
                                                      " (kernels/cuda/scratch_sizes.h)");
  USTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, positions_in, positions_out,
                                                     static_cast<int>(n), 0, bits, stream));

  const dim3 grid(static_cast<unsigned>((n + kSegment - 1) / kSegment),
                  static_cast<unsigned>((dim + kScatterThreads - 1) / kScatterThreads));
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    const auto* rows = static_cast<const T*>(dout);
    if (table_dtype == DType::f32)
      embedding_scatter_kernel<T, float>
          <<<grid, kScatterThreads, 0, stream>>>(static_cast<float*>(dtable), keys_out, positions_out, rows, n, vocab, dim);
    else
      embedding_scatter_kernel<T, T>
          <<<grid, kScatterThreads, 0, stream>>>(static_cast<T*>(dtable), keys_out, positions_out, rows, n, vocab, dim);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ustrain::cuda
