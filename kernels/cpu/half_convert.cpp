#include "kernels/cpu/half_convert.h"

#include <omp.h>

#include <cstring>

#include "kernels/error.h"

namespace ustrain::cpu {
namespace {

// Below this many elements one thread converts: waking the team costs more.
constexpr std::int64_t kParallelMin = 1 << 15;

int team(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// dst[i] = convert(src[i]) for n elements, on the team when there are enough of them.
template <class To, class From, class Convert>
void convert_each(To* dst, const From* src, std::int64_t n, int threads, Convert convert) {
#pragma omp parallel for simd if (n >= kParallelMin) schedule(static) num_threads(team(threads))
  for (std::int64_t i = 0; i < n; ++i) dst[i] = convert(src[i]);
}

}  // namespace

void widen(float* dst, const void* src, DType from, std::int64_t n, int threads) {
  switch (from) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case DType::bf16:
      return convert_each(dst, static_cast<const std::uint16_t*>(src), n, threads,
                          [](std::uint16_t h) { return bf16_to_float(h); });
    case DType::f16:
      return convert_each(dst, static_cast<const _Float16*>(src), n, threads,
                          [](_Float16 h) { return static_cast<float>(h); });
    default:
      break;
  }
  USTRAIN_ASSERT(false, std::string("widen: ") + dtype_name(from) + " is not a floating-point storage type");
}

void narrow(void* dst, DType to, const float* src, std::int64_t n, int threads) {
  switch (to) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case DType::bf16:
      return convert_each(static_cast<std::uint16_t*>(dst), src, n, threads,
                          [](float x) { return float_to_bf16(x); });
    case DType::f16:
      return convert_each(static_cast<_Float16*>(dst), src, n, threads, [](float x) { return static_cast<_Float16>(x); });
    default:
      break;
  }
  USTRAIN_ASSERT(false, std::string("narrow: ") + dtype_name(to) + " is not a floating-point storage type");
}

}  // namespace ustrain::cpu
