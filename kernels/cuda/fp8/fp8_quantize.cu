// FP8 quantisation kernels (see fp8_quantize.h), three launches on the stream:
//   1. group amaxes: each thread reduces a run of up to 8 elements of a source row, one
//      atomic max per group the run touches (non-negative floats order as their bits);
//   2. group scales: one thread per group, scale and inverse scale (and the delayed amax);
//   3. codes: elementwise, or through a 32x32 shared-memory tile when the operand is the
//      transpose, so that reads and writes are both coalesced.
// The encoder mirrors kernels/fp8/fp8_format.cpp bit for bit; the float adds and multiplies
// use the _rn intrinsics so that nothing is contracted into an FMA.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8/fp8_quantize.h"
#include "kernels/error.h"

namespace ustrain::cuda {
namespace {

constexpr int kRun = 8;         // source elements per thread in the amax pass
constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 16;  // beyond: grid-stride loops
constexpr int kTile = 32;       // transpose tile edge
constexpr int kTileRows = 8;    // threads per tile column

template <Fp8Format F>
struct FormatTraits {
  static constexpr int kMantissa = F == Fp8Format::e4m3 ? 3 : 2;
  static constexpr int kBias = F == Fp8Format::e4m3 ? 7 : 15;
  static constexpr float kMax = F == Fp8Format::e4m3 ? 448.0f : 57344.0f;
};

// fp8::encode(F, x, saturate = true): NaN -> 0x7f; |x| clamped to the largest finite value
// (infinities too), then rounded to nearest even: normal values on the float's own bits,
// values below the smallest normal at the smallest subnormal's quantum.
template <Fp8Format F>
__device__ __forceinline__ std::uint8_t encode_saturating(float x) {
  using T = FormatTraits<F>;
  constexpr int kDrop = 23 - T::kMantissa;
  constexpr float kMinNormal = 1.0f / static_cast<float>(1u << (T::kBias - 1));
  // 1.5 * 2^(23 + 1 - bias - mantissa): adding it rounds at the smallest subnormal's quantum.
  constexpr float kMagic = 1.5f * static_cast<float>(1u << (23 + 1 - T::kBias - T::kMantissa));
  // code = value * 2^(bias - 1 + mantissa) below the smallest normal
  constexpr float kSubnormalUnits = static_cast<float>(1u << (T::kBias - 1 + T::kMantissa));
  if (isnan(x)) return 0x7f;
  const std::uint32_t u = __float_as_uint(x);
  const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  float a = __uint_as_float(u & 0x7fffffffu);
  a = a > T::kMax ? T::kMax : a;
  if (a < kMinNormal) {
    const float r = __fsub_rn(__fadd_rn(a, kMagic), kMagic);  // a multiple of the smallest subnormal
    return static_cast<std::uint8_t>(sign | static_cast<int>(__fmul_rn(r, kSubnormalUnits)));
  }
  std::uint32_t b = __float_as_uint(a);
  b = (b + (1u << (kDrop - 1)) - 1u + ((b >> kDrop) & 1u)) & ~((1u << kDrop) - 1u);  // ties to even
  const auto exponent = static_cast<int>(b >> 23) - 127 + T::kBias;
  const auto mantissa = static_cast<int>((b >> kDrop) & ((1u << T::kMantissa) - 1u));
  return static_cast<std::uint8_t>(sign | (exponent << T::kMantissa) | mantissa);
}

__device__ __forceinline__ void atomic_max_nonnegative(float* at, float v) {
  atomicMax(reinterpret_cast<unsigned int*>(at), __float_as_uint(v));
}

// Pass 1: amax per group of the operand. A run is kRun consecutive source columns of one
// source row; its elements fall in at most kRun groups, consecutive ones usually the same.
__global__ void group_amax_kernel(const __nv_bfloat16* src, std::int64_t rows, std::int64_t cols, bool transpose,
                                  Fp8OperandShape shape, float* amax) {
  const std::int64_t runs_per_row = (cols + kRun - 1) / kRun;
  const std::int64_t runs = rows * runs_per_row;
  for (std::int64_t run = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; run < runs;
       run += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = run / runs_per_row, c0 = (run % runs_per_row) * kRun;
    const std::int64_t c1 = c0 + kRun < cols ? c0 + kRun : cols;
    std::int64_t group = -1;
    float m = 0.0f;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t g = transpose ? shape.group_of(c, r) : shape.group_of(r, c);
      if (g != group) {
        if (group >= 0 && m > 0.0f) atomic_max_nonnegative(amax + group, m);
        group = g;
        m = 0.0f;
      }
      const float a = fabsf(__bfloat162float(src[r * cols + c]));
      m = a > m ? a : m;  // NaN ignored
    }
    if (group >= 0 && m > 0.0f) atomic_max_nonnegative(amax + group, m);
  }
}

// fp8::scale_for_amax: max_finite / amax / 2^margin in double, capped at the largest float;
// `previous` when amax is 0 or not finite.
__device__ float scale_for_amax(float amax, float max_finite, int margin, float previous) {
  if (!(amax > 0.0f) || !isfinite(amax)) return previous;
  const double s = static_cast<double>(max_finite) / static_cast<double>(amax) / ldexp(1.0, margin);
  return static_cast<float>(fmin(s, static_cast<double>(FLT_MAX)));
}

// fp8::power_of_two_at_most.
__device__ float power_of_two_at_most(float s) {
  int e = 0;
  frexpf(s, &e);
  return ldexpf(1.0f, e - 1);
}

// Pass 2: each group's scale (natural grid) and inverse scale (cuBLASLt's layout).
__global__ void group_scale_kernel(Fp8OperandShape shape, const float* amax, float max_finite, int margin,
                                   bool power_of_two, const float* given_scale, float* record_amax, float* scale,
                                   float* descale) {
  const std::int64_t groups = shape.groups();
  for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float s;
    if (given_scale != nullptr) {
      s = *given_scale;
    } else {
      s = scale_for_amax(amax[g], max_finite, margin, 1.0f);
      if (power_of_two) s = power_of_two_at_most(s);
    }
    scale[g] = s;
    descale[shape.lt_index(g)] = __fdiv_rn(1.0f, s);
    if (record_amax != nullptr && g == 0) *record_amax = fmaxf(*record_amax, amax[0]);  // one group (tensor)
  }
}

// Pass 3, the operand is the source: codes[i] = encode(src[i] * scale of its group).
template <Fp8Format F>
__global__ void quantize_kernel(const __nv_bfloat16* src, std::int64_t rows, std::int64_t cols, Fp8OperandShape shape,
                                const float* scale, std::uint8_t* codes) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float s = scale[shape.group_of(i / cols, i % cols)];
    codes[i] = encode_saturating<F>(__fmul_rn(__bfloat162float(src[i]), s));
  }
}

// Pass 3, the operand is the transpose: codes (cols, rows) = encode of src (rows, cols)^T.
// Block (kTile, kTileRows) per 32x32 tile; the grid strides over tiles.
template <Fp8Format F>
__global__ void quantize_transpose_kernel(const __nv_bfloat16* src, std::int64_t rows, std::int64_t cols,
                                          Fp8OperandShape shape, const float* scale, std::uint8_t* codes) {
  __shared__ std::uint8_t tile[kTile][kTile + 1];
  const std::int64_t tiles_c = (cols + kTile - 1) / kTile, tiles_r = (rows + kTile - 1) / kTile;
  for (std::int64_t t = blockIdx.x; t < tiles_r * tiles_c; t += gridDim.x) {
    const std::int64_t r0 = (t / tiles_c) * kTile, c0 = (t % tiles_c) * kTile;
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {  // read rows of the source tile
      const std::int64_t r = r0 + j, c = c0 + threadIdx.x;
      if (r < rows && c < cols)
        tile[j][threadIdx.x] = encode_saturating<F>(__fmul_rn(__bfloat162float(src[r * cols + c]),
                                                              scale[shape.group_of(c, r)]));
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {  // write rows of the operand tile
      const std::int64_t o = c0 + j, k = r0 + threadIdx.x;
      if (o < cols && k < rows) codes[o * rows + k] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

unsigned blocks_for(std::int64_t items, int per_block) {
  const std::int64_t b = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

template <Fp8Format F>
void launch_codes(const Fp8QuantizeSource& src, const Fp8OperandShape& shape, const float* scale, std::uint8_t* codes,
                  cudaStream_t stream) {
  const auto* x = static_cast<const __nv_bfloat16*>(src.data);
  if (src.transpose) {
    const std::int64_t tiles = ((src.rows + kTile - 1) / kTile) * ((src.cols + kTile - 1) / kTile);
    quantize_transpose_kernel<F><<<blocks_for(tiles, 1), dim3(kTile, kTileRows), 0, stream>>>(x, src.rows, src.cols,
                                                                                               shape, scale, codes);
  } else {
    quantize_kernel<F><<<blocks_for(src.rows * src.cols, kThreads), kThreads, 0, stream>>>(x, src.rows, src.cols,
                                                                                          shape, scale, codes);
  }
  USTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fp8_quantize(const Fp8QuantizeSource& src, const Fp8QuantizeScaling& scaling, const Fp8QuantizeBuffers& out,
                  cudaStream_t stream) {
  const Fp8OperandShape shape = src.shape();
  USTRAIN_ASSERT(src.rows >= 0 && src.cols >= 0, "fp8_quantize: negative size");
  USTRAIN_ASSERT(scaling.given_scale == nullptr || shape.grouping == Fp8Grouping::tensor,
                 "fp8_quantize: a given scale is a tensor scale");
  USTRAIN_ASSERT(scaling.record_amax == nullptr || shape.grouping == Fp8Grouping::tensor,
                 "fp8_quantize: only a tensor amax is recorded");
  if (src.rows == 0 || src.cols == 0) return;
  const auto groups = static_cast<std::size_t>(shape.groups());
  USTRAIN_CUDA_CHECK(cudaMemsetAsync(out.amax, 0, groups * sizeof(float), stream));
  if (shape.grouping == Fp8Grouping::blk128)  // the padding of cuBLASLt's K-major grid
    USTRAIN_CUDA_CHECK(cudaMemsetAsync(out.descale, 0, static_cast<std::size_t>(shape.lt_floats()) * sizeof(float),
                                       stream));
  const std::int64_t runs = src.rows * ((src.cols + kRun - 1) / kRun);
  group_amax_kernel<<<blocks_for(runs, kThreads), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src.data),
                                                                         src.rows, src.cols, src.transpose, shape,
                                                                         out.amax);
  USTRAIN_CUDA_CHECK_LAUNCH();
  const float max_finite = scaling.format == Fp8Format::e4m3 ? 448.0f : 57344.0f;
  group_scale_kernel<<<blocks_for(static_cast<std::int64_t>(groups), kThreads), kThreads, 0, stream>>>(
      shape, out.amax, max_finite, scaling.margin, scaling.power_of_two, scaling.given_scale, scaling.record_amax,
      out.scale, out.descale);
  USTRAIN_CUDA_CHECK_LAUNCH();
  if (scaling.format == Fp8Format::e4m3) launch_codes<Fp8Format::e4m3>(src, shape, out.scale, out.codes, stream);
  else launch_codes<Fp8Format::e5m2>(src, shape, out.scale, out.codes, stream);
}

}  // namespace ustrain::cuda
