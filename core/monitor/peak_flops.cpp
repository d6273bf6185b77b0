#include "core/monitor/peak_flops.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "core/model/rng.h"
#include "core/monitor/kept_peak.h"

namespace ustrain {

double measure_gemm_flops(Backend& backend, std::int64_t m, std::int64_t n, std::int64_t k, int repeats,
                          DType dtype) {
  // Benchmark-only allocations, outside any training step. Operands are random (zeros run
  // faster than real data on some GPUs), drawn once for a block of 1 Mi values and repeated:
  // drawing every value of a (16 K, 16 K) operand took the host longer than the whole benchmark.
  std::vector<float> block(std::size_t{1} << 20);
  fill_normal(block.data(), block.size(), 7, 1.0);
  const auto alloc = [&](std::int64_t rows, std::int64_t cols, bool random) {
    const auto count = static_cast<std::size_t>(rows * cols);
    Tensor t(backend.allocate(count * dtype_size(dtype)), Shape{rows, cols}, dtype, backend.device());
    if (!random) return t;
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; i += block.size())
      std::copy_n(block.begin(), std::min(block.size(), count - i), host.begin() + static_cast<std::ptrdiff_t>(i));
    Tensor wide(backend.allocate(count * sizeof(float)), t.shape, DType::f32, backend.device());
    backend.copy(wide, Tensor(host.data(), t.shape));
    backend.convert(t, wide);
    backend.synchronize();
    backend.release(wide.data);
    return t;
  };
  Tensor x = alloc(m, k, true), w = alloc(n, k, true), out = alloc(m, n, false);
  // Best of at least `repeats` runs and at least 0.2 s: short GEMMs on a shared machine are noisy.
  double best = 0, spent = 0;
  backend.linear_forward(out, x, w);  // warm-up
  for (int r = 0; r < repeats || spent < 0.2; ++r) {
    backend.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    backend.linear_forward(out, x, w);
    backend.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spent += s;
    best = std::max(best, 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / s);
  }
  backend.release(x.data);
  backend.release(w.data);
  backend.release(out.data);
  return best;
}

PeakFlops device_peak_flops(Backend& backend, DType compute, const PeakCache& cache) {
  if (backend.device() == Device::cuda) {
    if (compute == DType::f32) return {67e12, "H100/H200 SXM fp32 peak without tensor cores (67 TFLOP/s)"};
    return {989e12, "H100/H200 SXM dense bf16/fp16 peak (989 TFLOP/s)"};
  }
  // bf16 GEMMs have their own rate (oneDNN's bf16 matmul); fp16 ones run on the fp32 GEMM.
  const bool bf16 = compute == DType::bf16;
  const std::string what = bf16 ? "this CPU's bf16 GEMM rate (1024^3)" : "this CPU's sgemm rate (1024^3)";
  const std::string key = peak_key(backend.name()) + (bf16 ? " bf16" : "");
  if (!cache.remeasure)
    if (const std::optional<KeptPeak> kept = read_kept_peak(cache.path, key))
      return {kept->flops_per_second,
              fmt::format("{} measured {} and kept in {} (train --measure-peak measures it again)", what,
                          kept->measured_at, cache.path)};
  const double f = measure_gemm_flops(backend, 1024, 1024, 1024, 5, bf16 ? DType::bf16 : DType::f32);
  const std::string now = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(
                                                                     std::chrono::system_clock::now())));
  const std::string not_kept = keep_peak(cache.path, key, {f, now});
  if (!not_kept.empty()) return {f, fmt::format("{} measured now (not kept: {})", what, not_kept)};
  return {f, fmt::format("{} measured now and kept in {}", what, cache.path)};
}

}  // namespace ustrain
