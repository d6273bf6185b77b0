#include "core/plan/calibration_measure.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/train/peak_flops.h"

namespace ustrain {
namespace {

// The best time of `run` over at least 3 calls and 0.1 s, after one untimed call.
double best_seconds(Backend& be, const std::function<void()>& run) {
  run();
  be.synchronize();
  double best = 1e30, spent = 0;
  for (int i = 0; i < 3 || spent < 0.1; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    be.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    spent += s;
  }
  return best;
}

struct Buffer {
  Backend& be;
  Tensor t;
  Buffer(Backend& b, Shape shape, DType dtype) : be(b) {
    t = Tensor(be.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype)), shape, dtype, be.device());
    be.fill(t, 0.01f);
  }
  ~Buffer() { be.release(t.data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Causal attention over (1, S) tokens of 8 query and 8 key/value heads of 64: FLOPs of both
// passes in the recording backend's convention (6 H S^2 Dh) over their time.
std::pair<double, double> attention_point(Backend& be, DType dtype, std::int64_t seq) {
  constexpr int kHeads = 8;
  constexpr std::int64_t kHeadDim = 64;
  const std::int64_t width = 3 * kHeads * kHeadDim;
  Buffer qkv(be, Shape{1, seq, width}, dtype), dqkv(be, Shape{1, seq, width}, dtype);
  Buffer out(be, Shape{1, seq, kHeads * kHeadDim}, dtype), dout(be, Shape{1, seq, kHeads * kHeadDim}, dtype);
  Buffer lse(be, Shape{1, kHeads, seq}, DType::f32);
  const double seconds = best_seconds(be, [&] {
    be.attention_forward(out.t, lse.t, qkv.t, kHeads, kHeads);
    be.attention_backward(dqkv.t, dout.t, qkv.t, out.t, lse.t, kHeads, kHeads);
  });
  const double flops = 6.0 * kHeads * static_cast<double>(seq * seq) * kHeadDim;
  return {flops / 3.0, flops / seconds};  // a point per call: the forward's FLOPs (a third)
}

}  // namespace

Calibration measure_calibration(Backend& be, DType compute, const std::string& source) {
  const bool gpu = be.device() == Device::cuda;
  Calibration c;
  for (std::int64_t s = 64; s <= (gpu ? 8192 : 1024); s *= 2) {
    const double rate = measure_gemm_flops(be, 4 * s, s, s, 3, compute);
    c.gemm.points.emplace_back(8.0 * static_cast<double>(s * s * s), rate);
  }
  for (std::int64_t s = 64; s <= (gpu ? 4096 : 1024); s *= 2) c.attention.points.push_back(attention_point(be, compute, s));
  {
    const std::int64_t n = std::int64_t{8} << 20;  // 32 MiB per fp32 operand: past the caches
    Buffer a(be, Shape{n}, DType::f32), b(be, Shape{n}, DType::f32);
    const double s = best_seconds(be, [&] { be.add(a.t, a.t, b.t); });
    c.memory_bytes_per_s = 3.0 * 4.0 * static_cast<double>(n) / s;
  }
  {
    Buffer a(be, Shape{64}, DType::f32);
    c.op_overhead_s = best_seconds(be, [&] { be.add(a.t, a.t, a.t); });
  }
  // Measured curves need not rise monotonically; the ends are what they are.
  c.source = source;
  return c;
}

}  // namespace ustrain
