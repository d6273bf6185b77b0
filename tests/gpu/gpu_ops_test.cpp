// The CUDA backend against the CPU reference: memory, elementwise ops, RMSNorm, RoPE, SwiGLU,
// cross-entropy and the optimizer ops. Tolerances: gpu_test_support.h. (Linear and attention,
// the ops built on matrix multiplies, are in gpu_matmul_ops_test.cpp; embedding in
// gpu_embedding_ops_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

// ---- memory ----

TEST_F(GpuTest, CopyRoundTripsEveryDtypeBitForBit) {
  const std::int64_t n = 1001;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32}) {
    std::vector<unsigned char> src(static_cast<std::size_t>(n) * dtype_size(t)), back(src.size(), 0);
    std::mt19937 rng(static_cast<std::uint32_t>(t) + 1);
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    DeviceTensor a(gpu(), {n}, t), b(gpu(), {n}, t);
    gpu().copy(a, Tensor(src.data(), {n}, t));  // host -> device
    gpu().copy(b, a);                            // device -> device
    gpu().copy(Tensor(back.data(), {n}, t), b);  // device -> host
    EXPECT_EQ(std::memcmp(src.data(), back.data(), src.size()), 0) << dtype_name(t);
  }
}

TEST_F(GpuTest, FillWritesTheBitsTheCpuWrites) {
  const std::int64_t n = 70001;
  const std::vector<std::pair<DType, float>> cases = {
      {DType::f32, -2.5f},       {DType::f32, 0.1f},  {DType::bf16, -2.5f}, {DType::bf16, 0.1f},
      {DType::bf16, 3.14159e-3f}, {DType::f16, 0.1f},  {DType::f16, -1e-6f}, {DType::f16, 0.0f},
      {DType::i32, -3.0f},        {DType::i32, 7.0f}};
  for (const auto& [t, value] : cases) {
    std::vector<unsigned char> want(static_cast<std::size_t>(n) * dtype_size(t)), got(want.size(), 0xEE);
    cpu().fill(Tensor(want.data(), {n}, t), value);
    DeviceTensor d(gpu(), {n}, t);
    gpu().fill(d, value);
    gpu().copy(Tensor(got.data(), {n}, t), d);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size()), 0) << dtype_name(t) << " fill " << value;
  }
}

// Floats of every magnitude from 2^-30 (below f16's smallest subnormal) to 2^30 (above f16's
// largest finite value), both signs, random mantissas; plus exact ties of the bf16 and f16
// grids, where round-to-nearest-even decides.
std::vector<float> conversion_inputs(std::size_t n) {
  std::mt19937 rng(24);
  std::vector<float> v;
  for (std::size_t i = 0; i < n; ++i) {
    const auto exponent = static_cast<std::uint32_t>(127 - 30 + rng() % 61);
    const std::uint32_t bits = (rng() & 0x80000000u) | (exponent << 23) | (rng() & 0x007FFFFFu);
    float x;
    std::memcpy(&x, &bits, 4);
    v.push_back(x);
  }
  for (float tie : {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(2.0f + 0x1p-7f), 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f})
    v.push_back(tie);
  return v;
}

TEST_F(GpuTest, ConvertRoundsLikeTheCpuBetweenEveryPairOfFloatDtypes) {
  const auto values = conversion_inputs(100000);
  const auto n = static_cast<std::int64_t>(values.size());
  for (DType from : {DType::f32, DType::bf16, DType::f16})
    for (DType to : {DType::f32, DType::bf16, DType::f16}) {
      // The source holds values of its own dtype, converted on the CPU from the f32 inputs.
      std::vector<float> f32_values = values;
      std::vector<unsigned char> src(static_cast<std::size_t>(n) * dtype_size(from));
      std::vector<unsigned char> want(static_cast<std::size_t>(n) * dtype_size(to)), got(want.size(), 0xEE);
      cpu().convert(Tensor(src.data(), {n}, from), Tensor(f32_values.data(), {n}));
      cpu().convert(Tensor(want.data(), {n}, to), Tensor(src.data(), {n}, from));
      DeviceTensor dsrc(gpu(), {n}, from), ddst(gpu(), {n}, to);
      gpu().copy(dsrc, Tensor(src.data(), {n}, from));
      gpu().convert(ddst, dsrc);
      gpu().copy(Tensor(got.data(), {n}, to), ddst);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size()), 0)
          << "convert " << dtype_name(from) << " -> " << dtype_name(to) << " differs from the CPU's rounding";
    }
}

TEST_F(GpuTest, PeakDeviceBytesCountsAllocations) {
  const std::size_t bytes = std::size_t{64} << 20;
  { DeviceTensor big(gpu(), {static_cast<std::int64_t>(bytes / 4)}, DType::f32); }
  EXPECT_GE(gpu().peak_device_bytes(), bytes);
}

// ---- add, scale, sum of squares ----

TEST_P(GpuActTest, AddMatchesCpuAlsoInPlace) {
  for (std::int64_t n : {1, 7, 40003}) {
    auto a = random_values(static_cast<std::size_t>(n), 1, act());
    auto b = random_values(static_cast<std::size_t>(n), 2, act());
    std::vector<float> want(a.size());
    cpu().add(host(want, {n}), host(a, {n}), host(b, {n}));
    auto da = on_device(gpu(), a, {n}, act()), db = on_device(gpu(), b, {n}, act());
    DeviceTensor out(gpu(), {n}, act());
    gpu().add(out, *da, *db);
    expect_close(out.download(), want, act_tolerance(act(), Measure::max_rel), "add n=" + std::to_string(n));
    gpu().add(*da, *da, *db);  // out aliases a, as the residual stream does
    expect_close(da->download(), want, act_tolerance(act(), Measure::max_rel), "add in place n=" + std::to_string(n));
  }
}

TEST_F(GpuTest, ScaleMatchesCpu) {
  for (std::int64_t n : {1, 13, 50001}) {
    auto x = random_values(static_cast<std::size_t>(n), 3, DType::f32);
    auto d = on_device(gpu(), x, {n}, DType::f32);
    cpu().scale(host(x, {n}), 0.3f);
    gpu().scale(*d, 0.3f);
    expect_close(d->download(), x, fp32_tolerance(Measure::max_rel), "scale n=" + std::to_string(n));
  }
}

// The interface sums in double: squares of floats are exact in double, and n positive terms
// summed in double are within n * 2^-53 of the exact sum. 1e-7 also admits squares rounded to
// float (each within 2^-24), but little more.
TEST_F(GpuTest, SumOfSquaresMatchesCpu) {
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{100003}, (std::int64_t{3} << 20) + 5}) {
    auto x = random_values(static_cast<std::size_t>(n), 4, DType::f32, -3.0f, 3.0f);
    auto d = on_device(gpu(), x, {n}, DType::f32);
    const double want = cpu().sum_of_squares(host(x, {n}));
    const double got = gpu().sum_of_squares(*d);
    EXPECT_NEAR(got, want, 1e-7 * want) << "n=" << n;
  }
}

// ---- AdamW: fp32 state, several steps with fresh gradients ----

TEST_F(GpuTest, AdamWMatchesCpuOverSeveralSteps) {
  const std::int64_t n = 10007;
  auto param = random_values(static_cast<std::size_t>(n), 5, DType::f32);
  std::vector<float> m(param.size(), 0.0f), v(param.size(), 0.0f);
  auto dp = on_device(gpu(), param, {n}, DType::f32), dm = on_device(gpu(), m, {n}, DType::f32),
       dv = on_device(gpu(), v, {n}, DType::f32);
  DeviceTensor dg(gpu(), {n}, DType::f32);
  for (std::int64_t step = 1; step <= 5; ++step) {
    auto grad = random_values(static_cast<std::size_t>(n), 100 + static_cast<std::uint32_t>(step), DType::f32, -2.0f,
                              2.0f);
    dg.upload(grad);
    const AdamWParams p{/*lr=*/1e-2f, /*beta1=*/0.9f, /*beta2=*/0.95f, /*eps=*/1e-8f, /*weight_decay=*/0.1f, step};
    cpu().adamw(host(param, {n}), host(grad, {n}), host(m, {n}), host(v, {n}), p);
    gpu().adamw(*dp, dg, *dm, *dv, p);
    const std::string at = "step " + std::to_string(step);
    expect_close(dp->download(), param, fp32_tolerance(Measure::max_rel), "adamw param, " + at);
    expect_close(dm->download(), m, fp32_tolerance(Measure::max_rel), "adamw m, " + at);
    expect_close(dv->download(), v, fp32_tolerance(Measure::max_rel), "adamw v, " + at);
  }
}

// ---- RMSNorm ----

struct RmsCase {
  std::int64_t rows, dim;
};
// Not D = 1: there dx = w g rstd eps / (x^2 + eps) is all cancellation, in any precision.
const RmsCase kRmsCases[] = {{67, 96}, {5, 2048}, {33, 37}, {1, 7}};

TEST_P(GpuActTest, RmsNormForwardAndBackwardMatchCpu) {
  const float eps = 1e-5f;
  for (const auto& c : kRmsCases) {
    const std::string at = " rows=" + std::to_string(c.rows) + " D=" + std::to_string(c.dim);
    const Shape xs{c.rows, c.dim}, ws{c.dim}, rs{c.rows};
    auto x = random_values(static_cast<std::size_t>(c.rows * c.dim), 14, act(), -2.0f, 2.0f);
    auto w = random_values(static_cast<std::size_t>(c.dim), 15, act(), 0.5f, 1.5f);
    auto dout = random_values(x.size(), 16, act());
    const auto prefill = random_values(w.size(), 17, DType::f32);

    std::vector<float> out(x.size()), rstd(static_cast<std::size_t>(c.rows)), dx(x.size());
    auto dweight = prefill;
    cpu().rmsnorm_forward(host(out, xs), host(rstd, rs), host(x, xs), host(w, ws), eps);
    cpu().rmsnorm_backward(host(dx, xs), host(dweight, ws), host(dout, xs), host(x, xs), host(w, ws), host(rstd, rs));

    auto gx = on_device(gpu(), x, xs, act()), gw = on_device(gpu(), w, ws, act());
    auto gdout = on_device(gpu(), dout, xs, act()), gdweight = on_device(gpu(), prefill, ws, DType::f32);
    DeviceTensor gout(gpu(), xs, act()), grstd(gpu(), rs, DType::f32), gdx(gpu(), xs, act());
    gpu().rmsnorm_forward(gout, grstd, *gx, *gw, eps);
    gpu().rmsnorm_backward(gdx, *gdweight, *gdout, *gx, *gw, grstd);

    expect_close(gout.download(), out, act_tolerance(act(), Measure::max_rel), "rmsnorm out" + at);
    expect_close(grstd.download(), rstd, fp32_tolerance(Measure::max_rel), "rmsnorm rstd" + at);
    expect_close(gdx.download(), dx, act_tolerance(act(), Measure::max_rel), "rmsnorm dx" + at);
    expect_close(gdweight->download(), dweight, fp32_tolerance(Measure::norm_rel), "rmsnorm dweight" + at);
  }
}

// ---- RoPE ----

// RoPE's inverse frequencies without scaling: theta^(-i/half).
std::vector<double> rope_frequencies(std::int64_t half, double theta) {
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(theta, -static_cast<double>(i) / static_cast<double>(half));
  return inv_freq;
}

TEST_F(GpuTest, RopeTablesMatchCpu) {
  for (const auto& [positions, half, theta] : {std::tuple{2048, 32, 10000.0}, std::tuple{77, 20, 500000.0}}) {
    const Shape s{positions, half};
    const std::vector<double> inv_freq = rope_frequencies(half, theta);
    std::vector<float> cos_table(static_cast<std::size_t>(positions * half)), sin_table(cos_table.size());
    cpu().rope_tables(host(cos_table, s), host(sin_table, s), inv_freq, 0);
    DeviceTensor gcos(gpu(), s, DType::f32), gsin(gpu(), s, DType::f32);
    gpu().rope_tables(gcos, gsin, inv_freq, 0);
    const std::string at = " S=" + std::to_string(positions) + " Dh/2=" + std::to_string(half);
    expect_close(gcos.download(), cos_table, fp32_tolerance(Measure::max_rel), "rope cos" + at);
    expect_close(gsin.download(), sin_table, fp32_tolerance(Measure::max_rel), "rope sin" + at);
  }
}

struct RopeCase {
  std::int64_t batch, seq, heads, kv_heads, head_dim, positions;  // positions >= seq: the table may be longer
  std::int64_t width() const { return (heads + 2 * kv_heads) * head_dim; }
};
const RopeCase kRopeCases[] = {{2, 33, 4, 2, 40, 50}, {1, 128, 8, 2, 64, 128}, {3, 5, 3, 1, 2, 9}};

TEST_P(GpuActTest, RopeForwardAndBackwardMatchCpuAndLeaveValuesAlone) {
  for (const auto& c : kRopeCases) {
    const int rotated = static_cast<int>(c.heads + c.kv_heads), dh = static_cast<int>(c.head_dim);
    const Shape qs{c.batch, c.seq, c.width()}, ts{c.positions, c.head_dim / 2};
    std::vector<float> cos_table(static_cast<std::size_t>(ts.numel())), sin_table(cos_table.size());
    cpu().rope_tables(host(cos_table, ts), host(sin_table, ts), rope_frequencies(c.head_dim / 2, 10000.0), 0);
    auto gcos = on_device(gpu(), cos_table, ts, DType::f32), gsin = on_device(gpu(), sin_table, ts, DType::f32);

    for (bool backward : {false, true}) {
      const std::string what = std::string(backward ? "rope backward" : "rope forward") + " S=" +
                               std::to_string(c.seq) + " Dh=" + std::to_string(c.head_dim);
      const auto input = random_values(static_cast<std::size_t>(qs.numel()), backward ? 19 : 18, act());
      auto want = input;
      auto g = on_device(gpu(), input, qs, act());
      if (backward) {
        cpu().rope_backward(host(want, qs), host(cos_table, ts), host(sin_table, ts), rotated, dh);
        gpu().rope_backward(*g, *gcos, *gsin, rotated, dh);
      } else {
        cpu().rope_forward(host(want, qs), host(cos_table, ts), host(sin_table, ts), rotated, dh);
        gpu().rope_forward(*g, *gcos, *gsin, rotated, dh);
      }
      const auto got = g->download();
      expect_close(got, want, act_tolerance(act(), Measure::max_rel), what);
      // The value heads, after the rotated ones, are not touched.
      bool values_kept = true;
      for (std::int64_t row = 0; row < c.batch * c.seq; ++row)
        for (std::int64_t i = rotated * c.head_dim; i < c.width(); ++i) {
          const auto k = static_cast<std::size_t>(row * c.width() + i);
          values_kept = values_kept && std::memcmp(&got[k], &input[k], 4) == 0;
        }
      EXPECT_TRUE(values_kept) << what << ": the value heads changed";
    }
  }
}

// ---- SwiGLU ----

struct SwigluCase {
  std::int64_t rows, hidden;
};
const SwigluCase kSwigluCases[] = {{37, 200}, {4, 8192}, {1, 1}};

TEST_P(GpuActTest, SwigluForwardAndBackwardMatchCpu) {
  for (const auto& c : kSwigluCases) {
    const std::string at = " rows=" + std::to_string(c.rows) + " F=" + std::to_string(c.hidden);
    const Shape gs{c.rows, 2 * c.hidden}, os{c.rows, c.hidden};
    // Gates out to +-6 reach both tails of the sigmoid.
    auto gate_up = random_values(static_cast<std::size_t>(gs.numel()), 20, act(), -6.0f, 6.0f);
    auto dout = random_values(static_cast<std::size_t>(os.numel()), 21, act());
    std::vector<float> out(static_cast<std::size_t>(os.numel())), dgate_up(gate_up.size());
    cpu().swiglu_forward(host(out, os), host(gate_up, gs));
    cpu().swiglu_backward(host(dgate_up, gs), host(dout, os), host(gate_up, gs));

    auto ggu = on_device(gpu(), gate_up, gs, act()), gdout = on_device(gpu(), dout, os, act());
    DeviceTensor gout(gpu(), os, act()), gdgu(gpu(), gs, act());
    gpu().swiglu_forward(gout, *ggu);
    gpu().swiglu_backward(gdgu, *gdout, *ggu);
    expect_close(gout.download(), out, act_tolerance(act(), Measure::max_rel), "swiglu out" + at);
    expect_close(gdgu.download(), dgate_up, act_tolerance(act(), Measure::max_rel), "swiglu dgate_up" + at);
  }
}

// ---- cross-entropy ----

struct CrossEntropyCase {
  std::int64_t rows, vocab;
};
// Vocabularies that are multiples of nothing a kernel might tile by (1013 and 32003 are prime).
const CrossEntropyCase kCrossEntropyCases[] = {{61, 1013}, {16, 32003}, {3, 2}};

// Targets in range, with every fourth row ignored (-1) and the first and last class present.
std::vector<std::int32_t> targets_with_ignored(const CrossEntropyCase& c) {
  auto t = random_ids(static_cast<std::size_t>(c.rows), static_cast<std::int32_t>(c.vocab), 22);
  for (std::size_t i = 1; i < t.size(); i += 4) t[i] = -1;
  t[0] = 0;
  if (t.size() > 2) t[2] = static_cast<std::int32_t>(c.vocab - 1);
  return t;
}

TEST_P(GpuActTest, CrossEntropyMatchesCpuAndIgnoresNegativeTargets) {
  for (const auto& c : kCrossEntropyCases) {
    const std::string at = " N=" + std::to_string(c.rows) + " V=" + std::to_string(c.vocab);
    const Shape ls{c.rows, c.vocab}, rs{c.rows};
    auto logits = random_values(static_cast<std::size_t>(ls.numel()), 23, act(), -4.0f, 4.0f);
    auto targets = targets_with_ignored(c);
    std::int64_t counted = 0;
    for (auto t : targets) counted += t >= 0 ? 1 : 0;
    const float dloss = 1.0f / static_cast<float>(counted);  // the mean over counted tokens

    std::vector<float> losses(static_cast<std::size_t>(c.rows)), lse(losses.size()), dlogits(logits.size());
    cpu().cross_entropy_forward(host(losses, rs), host(lse, rs), host(logits, ls), host_ids(targets, rs));
    cpu().cross_entropy_backward(host(dlogits, ls), host(logits, ls), host(lse, rs), host_ids(targets, rs), dloss);

    auto glogits = on_device(gpu(), logits, ls, act());
    auto gtargets = ids_on_device(gpu(), targets);
    DeviceTensor glosses(gpu(), rs, DType::f32), glse(gpu(), rs, DType::f32), gdlogits(gpu(), ls, act());
    gpu().cross_entropy_forward(glosses, glse, *glogits, *gtargets);
    gpu().cross_entropy_backward(gdlogits, *glogits, glse, *gtargets, dloss);
    const auto got_losses = glosses.download(), got_lse = glse.download(), got_d = gdlogits.download();

    expect_close(got_losses, losses, fp32_tolerance(Measure::max_rel), "cross-entropy losses" + at);
    std::vector<float> lse_counted, want_lse_counted;  // lse is unspecified on ignored rows
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] >= 0) {
        lse_counted.push_back(got_lse[i]);
        want_lse_counted.push_back(lse[i]);
        continue;
      }
      EXPECT_EQ(got_losses[i], 0.0f) << "ignored row " << i << at;
      bool zero_row = true;
      const auto row = got_d.begin() + static_cast<std::ptrdiff_t>(i) * c.vocab;
      for (std::int64_t v = 0; v < c.vocab; ++v) zero_row = zero_row && row[v] == 0.0f;
      EXPECT_TRUE(zero_row) << "ignored row " << i << " has a nonzero gradient" << at;
    }
    expect_close(lse_counted, want_lse_counted, fp32_tolerance(Measure::max_rel), "cross-entropy lse" + at);
    expect_close(got_d, dlogits, act_tolerance(act(), Measure::max_rel), "cross-entropy dlogits" + at);

    // dlogits may alias logits, as the model does to spare a (N, V) buffer.
    gpu().cross_entropy_backward(*glogits, *glogits, glse, *gtargets, dloss);
    expect_close(glogits->download(), dlogits, act_tolerance(act(), Measure::max_rel),
                 "cross-entropy dlogits in place of logits" + at);
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuActTest, ::testing::Values(DType::f32, DType::bf16, DType::f16), act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
