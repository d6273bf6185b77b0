#include "kernels/cpu/half_convert.h"

#include <omp.h>

#include <cstring>

#include "kernels/error.h"

namespace ustrain::cpu {
namespace {

// Below this many elements one thread converts: waking the team costs more.
constexpr std::int64_t kParallelMin = 1 << 15;

int team(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

}  // namespace

void widen(float* dst, const void* src, DType from, std::int64_t n, int threads) {
  switch (from) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case DType::bf16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
#pragma omp parallel for simd if (n >= kParallelMin) schedule(static) num_threads(team(threads))
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
      return;
    }
    case DType::f16: {
      const auto* s = static_cast<const _Float16*>(src);
#pragma omp parallel for simd if (n >= kParallelMin) schedule(static) num_threads(team(threads))
      for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
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
    case DType::bf16: {
      auto* d = static_cast<std::uint16_t*>(dst);
#pragma omp parallel for simd if (n >= kParallelMin) schedule(static) num_threads(team(threads))
      for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
      return;
    }
    case DType::f16: {
      auto* d = static_cast<_Float16*>(dst);
#pragma omp parallel for simd if (n >= kParallelMin) schedule(static) num_threads(team(threads))
      for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<_Float16>(src[i]);
      return;
    }
    default:
      break;
  }
  USTRAIN_ASSERT(false, std::string("narrow: ") + dtype_name(to) + " is not a floating-point storage type");
}

}  // namespace ustrain::cpu
