#include "core/plan/calibration_measure.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include <cstdint>
#include <vector>

namespace ustrain {
namespace {

// The fastest time of `run` over at least 3 calls and 20 ms, after one untimed call: on a
// machine shared with other work the fastest call is the one least disturbed by it, the figure
// that repeats from one measurement to the next.
double fastest_seconds(Backend& be, const std::function<void()>& run) {
  run();
  be.synchronize();
  double best = 1e30, spent = 0;
  for (int calls = 0; calls < 3 || spent < 0.02; ++calls) {
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
    // Varied values (some GPUs run faster on constant operands), through an fp32 copy.
    std::vector<float> host(static_cast<std::size_t>(shape.numel()));
    std::uint32_t x = 12345;
    for (float& v : host) v = static_cast<float>((x = x * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    Tensor wide(be.allocate(host.size() * sizeof(float)), shape, DType::f32, be.device());
    be.copy(wide, Tensor(host.data(), shape));
    be.convert(t, wide);
    be.synchronize();
    be.release(wide.data);
  }
  ~Buffer() { be.release(t.data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Causal attention over (1, S) tokens of `heads` query and key/value heads of `head_dim`: FLOPs
// of both passes in the recording backend's convention (6 H S^2 Dh) over their time.
std::pair<double, double> attention_point(Backend& be, DType dtype, std::int64_t seq, int kHeads,
                                          std::int64_t kHeadDim) {
  const std::int64_t width = 3 * kHeads * kHeadDim;
  Buffer qkv(be, Shape{1, seq, width}, dtype), dqkv(be, Shape{1, seq, width}, dtype);
  Buffer out(be, Shape{1, seq, kHeads * kHeadDim}, dtype), dout(be, Shape{1, seq, kHeads * kHeadDim}, dtype);
  Buffer lse(be, Shape{1, kHeads, seq}, DType::f32);
  const SeqRange all{0, seq};  // the whole sequence, one block of its own keys (as cp = 1 runs it)
  const AttentionMask causal = AttentionMask::causal();
  const double seconds = fastest_seconds(be, [&] {
    be.attention_block_forward(out.t, lse.t, qkv.t, all, Tensor(), all, causal, kHeads, kHeads);
    be.attention_block_backward(dqkv.t, Tensor(), dout.t, qkv.t, all, Tensor(), all, out.t, lse.t, causal, kHeads,
                                kHeads);
  });
  const double flops = 6.0 * kHeads * static_cast<double>(seq * seq) * kHeadDim;
  return {flops / 3.0, flops / seconds};  // a point per call: the forward's FLOPs (a third)
}

}  // namespace

ModelShapes model_shapes(const ModelSection& m) {
  const std::int64_t head_dim = m.d_model / m.n_heads;
  return {head_dim,
          {{(m.n_heads + 2 * m.n_kv_heads) * head_dim, m.d_model},
           {m.d_model, m.n_heads * head_dim},
           {2 * m.ffn_hidden, m.d_model},
           {m.d_model, m.ffn_hidden},
           {m.vocab_size, m.d_model}}};
}

Calibration measure_calibration(Backend& be, DType compute, const std::string& source, const ModelShapes& model) {
  const bool gpu = be.device() == Device::cuda;
  Calibration c;
  // The model's linear layers, each's three GEMMs (forward, input and weight gradients) as
  // training runs them, at a ladder of token counts: one point per count, at the mean FLOPs of
  // a call, with the rate of all of them together.
  for (std::int64_t tokens = gpu ? 512 : 64; tokens <= (gpu ? 32768 : 4096); tokens *= 4) {
    double flops = 0, seconds = 0;
    for (const auto& [out_features, in_features] : model.linears) {
      Buffer x(be, Shape{tokens, in_features}, compute), w(be, Shape{out_features, in_features}, compute);
      Buffer out(be, Shape{tokens, out_features}, compute), dx(be, Shape{tokens, in_features}, compute);
      Buffer dw(be, Shape{out_features, in_features}, DType::f32);
      flops += 3 * 2.0 * static_cast<double>(tokens * out_features * in_features);
      seconds += fastest_seconds(be, [&] { be.linear_forward(out.t, x.t, w.t); }) +
                 fastest_seconds(be, [&] { be.linear_backward_input(dx.t, out.t, w.t); }) +
                 fastest_seconds(be, [&] { be.linear_backward_weight(dw.t, out.t, x.t); });
    }
    c.gemm.points.emplace_back(flops / (3.0 * static_cast<double>(model.linears.size())), flops / seconds);
  }
  std::sort(c.gemm.points.begin(), c.gemm.points.end());
  for (std::int64_t s = 64; s <= (gpu ? 4096 : 1024); s *= 2) c.attention.points.push_back(attention_point(be, compute, s, 8, model.head_dim));
  {
    // The step's main memory-bound kernels on (8192, 1024) activations: a residual add, an
    // RMSNorm and a SwiGLU, their bytes (as the recording backend counts them) over their time.
    const std::int64_t rows = 8192, d = 1024;
    Buffer a(be, Shape{rows, d}, compute), b(be, Shape{rows, d}, compute), out(be, Shape{rows, d}, compute);
    Buffer gate_up(be, Shape{rows, 2 * d}, compute), weight(be, Shape{d}, compute), rstd(be, Shape{rows}, DType::f32);
    const double bytes = static_cast<double>(rows * d * dtype_size(compute));
    const double seconds = fastest_seconds(be, [&] { be.add(out.t, a.t, b.t); }) +
                           fastest_seconds(be, [&] { be.rmsnorm_forward(out.t, rstd.t, a.t, weight.t, 1e-5f); }) +
                           fastest_seconds(be, [&] { be.swiglu_forward(out.t, gate_up.t); });
    c.memory_bytes_per_s = (3 * bytes + 2 * bytes + 3 * bytes) / seconds;
  }
  {
    Buffer a(be, Shape{64}, DType::f32);
    c.op_overhead_s = fastest_seconds(be, [&] { be.add(a.t, a.t, a.t); });
  }
  // Measured curves need not rise monotonically; the ends are what they are.
  c.source = source;
  return c;
}

namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

EfficiencyCurve median_curve(const std::vector<Calibration>& all, EfficiencyCurve Calibration::*curve) {
  EfficiencyCurve c = all.front().*curve;
  for (std::size_t i = 0; i < c.points.size(); ++i) {
    std::vector<double> rates;
    for (const Calibration& one : all) rates.push_back((one.*curve).points[i].second);
    c.points[i].second = median(rates);
  }
  return c;
}

}  // namespace

Calibration measure_shared_cpu_calibration(int ranks, int threads, DType compute, const std::string& source,
                                           const ModelShapes& model) {
  std::vector<Calibration> each(static_cast<std::size_t>(ranks));
  {
    std::vector<std::jthread> workers;
    for (std::size_t i = 0; i < each.size(); ++i)
      workers.emplace_back([&, i] {
        const std::unique_ptr<Backend> backend = make_backend(Device::cpu, threads);
        each[i] = measure_calibration(*backend, compute, source, model);
      });
  }
  Calibration c = each.front();
  c.gemm = median_curve(each, &Calibration::gemm);
  c.attention = median_curve(each, &Calibration::attention);
  std::vector<double> bandwidth, overhead;
  for (const Calibration& one : each) {
    bandwidth.push_back(one.memory_bytes_per_s);
    overhead.push_back(one.op_overhead_s);
  }
  c.memory_bytes_per_s = median(bandwidth);
  c.op_overhead_s = median(overhead);
  return c;
}

}  // namespace ustrain
