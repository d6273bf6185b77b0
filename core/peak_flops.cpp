#include "core/peak_flops.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/rng.h"

namespace ustrain {

double measure_gemm_flops(Backend& backend, std::int64_t m, std::int64_t n, std::int64_t k, int repeats) {
  // Benchmark-only allocations, outside any training step.
  const auto alloc = [&](std::int64_t rows, std::int64_t cols) {
    Tensor t(backend.allocate(static_cast<std::size_t>(rows * cols) * 4), Shape{rows, cols}, DType::f32,
             backend.device());
    std::vector<float> host(static_cast<std::size_t>(rows * cols));
    fill_normal(host.data(), host.size(), 7, 1.0);
    backend.copy(t, Tensor(host.data(), t.shape));
    return t;
  };
  Tensor x = alloc(m, k), w = alloc(n, k), out = alloc(m, n);
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

PeakFlops device_peak_flops(Backend& backend) {
  if (backend.device() == Device::cuda) return {989e12, "H100/H200 SXM dense bf16 peak (989 TFLOP/s)"};
  const double f = measure_gemm_flops(backend, 1024, 1024, 1024, 5);
  return {f, "this CPU's measured sgemm rate (1024^3)"};
}

}  // namespace ustrain
