// CpuBackend: construction, memory, copy/fill, and the elementwise and optimizer ops.
#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/host_memory.h"

namespace ustrain {
namespace {

constexpr std::size_t kAlignment = 64;
// Elementwise loops below this size run on one thread: waking the team costs more.
constexpr std::int64_t kParallelMin = 1 << 15;
// sum_of_squares adds fixed-size chunks in order, so its bits never depend on the thread count.
constexpr std::int64_t kReductionChunk = 1 << 14;

std::size_t round_up(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
}

void* aligned_bytes(std::size_t bytes) {
  // round_up must not wrap around to a small allocation.
  const bool addressable = bytes <= std::numeric_limits<std::size_t>::max() - kAlignment;
  void* p = addressable ? std::aligned_alloc(kAlignment, round_up(bytes)) : nullptr;
  if (p == nullptr)
    throw UserError("out of host memory: could not allocate " + std::to_string(bytes) +
                    " bytes; lower train.micro_batch or train.seq_len, or use a smaller model");
  return p;
}

void expect_cpu_f32(const Tensor& t, const char* what) {
  USTRAIN_ASSERT(t.device == Device::cpu, std::string(what) + " is not a cpu tensor");
  USTRAIN_ASSERT(t.dtype == DType::f32, std::string(what) + " must be f32");
}


template <class T>
void fill_as(void* data, std::int64_t n, T value) {
  auto* p = static_cast<T*>(data);
  std::fill(p, p + n, value);
}

template <class Int>
Int exact_integer(float value, DType t) {
  const auto as_int = static_cast<Int>(value);
  USTRAIN_ASSERT(static_cast<float>(as_int) == value,
                 "fill value " + std::to_string(value) + " is not representable as " + dtype_name(t));
  return as_int;
}

}  // namespace

void* ScratchBuffer::bytes(std::size_t count) {
  if (count > capacity_) {
    data_.reset(aligned_bytes(count));
    capacity_ = round_up(count);
  }
  return data_.get();
}

void ScratchBuffer::Free::operator()(void* p) const { std::free(p); }

CpuBackend::CpuBackend(int threads) : threads_(threads > 0 ? threads : omp_get_max_threads()) {
  USTRAIN_ASSERT(threads >= 0, "negative thread count");
  // GEMMs are spread over OpenMP threads (see parallel_gemm.h); OpenBLAS's own pool stays idle.
  openblas_set_num_threads(1);
}

std::string CpuBackend::name() const { return "cpu (" + std::to_string(threads_) + " threads)"; }

void* CpuBackend::allocate(std::size_t bytes) { return aligned_bytes(bytes); }

std::size_t CpuBackend::available_memory_bytes() const { return host_available_bytes(); }

void CpuBackend::release(void* p) { std::free(p); }

void CpuBackend::copy(Tensor dst, const Tensor& src) {
  USTRAIN_ASSERT(dst.device == Device::cpu && src.device == Device::cpu, "cpu copy of a non-cpu tensor");
  USTRAIN_ASSERT(dst.dtype == src.dtype,
                 std::string("copy ") + dtype_name(src.dtype) + " into " + dtype_name(dst.dtype));
  USTRAIN_ASSERT(dst.numel() == src.numel(), "copy " + src.shape.str() + " into " + dst.shape.str());
  if (dst.data != src.data && dst.bytes() > 0) std::memmove(dst.data, src.data, dst.bytes());
}

void CpuBackend::fill(Tensor dst, float value) {
  USTRAIN_ASSERT(dst.device == Device::cpu, "cpu fill of a non-cpu tensor");
  const std::int64_t n = dst.numel();
  switch (dst.dtype) {
    case DType::f32:
      fill_as<float>(dst.data, n, value);
      break;
    case DType::bf16:
      fill_as<std::uint16_t>(dst.data, n, cpu::float_to_bf16(value));
      break;
    case DType::f16:
      fill_as<_Float16>(dst.data, n, static_cast<_Float16>(value));
      break;
    case DType::i32:
      fill_as<std::int32_t>(dst.data, n, exact_integer<std::int32_t>(value, dst.dtype));
      break;
    case DType::u16:
      fill_as<std::uint16_t>(dst.data, n, exact_integer<std::uint16_t>(value, dst.dtype));
      break;
    case DType::u32:
      fill_as<std::uint32_t>(dst.data, n, exact_integer<std::uint32_t>(value, dst.dtype));
      break;
    case DType::f64:
      fill_as<double>(dst.data, n, static_cast<double>(value));
      break;
  }
}

void CpuBackend::convert(Tensor dst, const Tensor& src) {
  USTRAIN_ASSERT(dst.device == Device::cpu && src.device == Device::cpu, "cpu convert of a non-cpu tensor");
  USTRAIN_ASSERT(dst.numel() == src.numel(), "convert " + src.shape.str() + " into " + dst.shape.str());
  if (dst.dtype == src.dtype) {
    copy(dst, src);
    return;
  }
  const auto floating = [](DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; };
  USTRAIN_ASSERT(floating(dst.dtype) && floating(src.dtype),
                 std::string("convert ") + dtype_name(src.dtype) + " into " + dtype_name(dst.dtype) +
                     ": only f32, bf16 and f16 convert");
  const std::int64_t n = dst.numel();
  if (src.dtype == DType::f32) return cpu::narrow(dst.data, dst.dtype, src.f32(), n, threads_);
  if (dst.dtype == DType::f32) return cpu::widen(dst.f32(), src.data, src.dtype, n, threads_);
  // bf16 <-> f16: through fp32 in blocks (widening is exact, so one rounding).
  constexpr std::int64_t kBlock = 4096;
  float wide[kBlock];
  const std::size_t width = dtype_size(src.dtype);
  for (std::int64_t i = 0; i < n; i += kBlock) {
    const std::int64_t count = std::min(kBlock, n - i);
    cpu::widen(wide, static_cast<const char*>(src.data) + i * static_cast<std::int64_t>(width), src.dtype, count);
    cpu::narrow(static_cast<char*>(dst.data) + i * static_cast<std::int64_t>(width), dst.dtype, wide, count);
  }
}

void CpuBackend::add(Tensor out, Tensor a, Tensor b) {
  expect_cpu_f32(out, "add out");
  expect_cpu_f32(a, "add a");
  expect_cpu_f32(b, "add b");
  USTRAIN_ASSERT(a.numel() == out.numel() && b.numel() == out.numel(),
                 "add " + a.shape.str() + " + " + b.shape.str() + " -> " + out.shape.str());
  float* o = out.f32();
  const float* x = a.f32();
  const float* y = b.f32();
  const std::int64_t n = out.numel();
#pragma omp parallel for schedule(static) num_threads(threads_) if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

void CpuBackend::scale(Tensor x, float factor) {
  expect_cpu_f32(x, "scale x");
  float* p = x.f32();
  const std::int64_t n = x.numel();
#pragma omp parallel for schedule(static) num_threads(threads_) if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) p[i] *= factor;
}

double CpuBackend::sum_of_squares(Tensor x) {
  expect_cpu_f32(x, "sum_of_squares x");
  const float* p = x.f32();
  const std::int64_t n = x.numel();
  const std::int64_t chunks = (n + kReductionChunk - 1) / kReductionChunk;
  double* partial = reduction_scratch_.as<double>(static_cast<std::size_t>(chunks));
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kReductionChunk;
    partial[c] = cpu::sum_squares(p + begin, std::min(kReductionChunk, n - begin));
  }
  double total = 0.0;
  for (std::int64_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

void CpuBackend::adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamWParams& p) {
  expect_cpu_f32(param, "adamw param");
  expect_cpu_f32(grad, "adamw grad");
  expect_cpu_f32(m, "adamw m");
  expect_cpu_f32(v, "adamw v");
  const std::int64_t n = param.numel();
  USTRAIN_ASSERT(grad.numel() == n && m.numel() == n && v.numel() == n, "adamw tensors differ in size");
  USTRAIN_ASSERT(p.step >= 1, "adamw step is 1-based");

  const double step = static_cast<double>(p.step);
  const float inv_bias1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta1), step)));
  const float inv_bias2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta2), step)));
  const float b1 = p.beta1, b2 = p.beta2, lr = p.lr, eps = p.eps, wd = p.weight_decay, gs = p.grad_scale;
  float* w = param.f32();
  const float* grads = grad.f32();
  float* mp = m.f32();
  float* vp = v.f32();
#pragma omp parallel for schedule(static) num_threads(threads_) if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = grads[i] * gs;
    const float mi = b1 * mp[i] + (1.0f - b1) * g;
    const float vi = b2 * vp[i] + (1.0f - b2) * g * g;
    mp[i] = mi;
    vp[i] = vi;
    const float update = (mi * inv_bias1) / (std::sqrt(vi * inv_bias2) + eps) + wd * w[i];
    w[i] -= lr * update;
  }
}

}  // namespace ustrain
