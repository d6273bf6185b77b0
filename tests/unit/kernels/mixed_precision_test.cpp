// bf16 and fp16 on the CPU (CpuMixedBackend): the storage formats against a float64 model of
// them, the GEMMs against float64 with each dtype's tolerance (those of the GPU tests), and
// every other op as the fp32 op on the same values, rounded once.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_mixed_backend.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/scoped_omp_threads.h"
#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

// ---- the formats: nearest representable value, ties to the even significand ----

// Every finite non-negative value of a 16-bit format, ascending, with its bits.
struct Format {
  DType dtype;
  std::vector<std::pair<double, std::uint16_t>> values;
  double max_finite;
};

double decode_f16(std::uint16_t bits) {  // exact, in float64
  const int exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
  const double magnitude = exponent == 0 ? std::ldexp(fraction, -24) : std::ldexp(1024 + fraction, exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
}
double decode_bf16(std::uint16_t bits) { return cpu::bf16_to_float(bits); }

Format format(DType t) {
  Format f{t, {}, 0};
  const std::uint16_t exponent_mask = t == DType::bf16 ? 0x7f80 : 0x7c00;
  for (std::uint32_t b = 0; b < 0x8000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if ((bits & exponent_mask) == exponent_mask) continue;  // inf and NaN
    f.values.emplace_back(t == DType::bf16 ? decode_bf16(bits) : decode_f16(bits), bits);
  }
  f.max_finite = f.values.back().first;
  return f;
}

// IEEE round to nearest, ties to even, in float64; NaN for NaN, +-inf beyond the overflow bound.
double nearest(const Format& f, double x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  const double ulp_top = f.max_finite - std::prev(f.values.end(), 2)->first;
  if (a >= f.max_finite + ulp_top / 2) return std::copysign(std::numeric_limits<double>::infinity(), x);
  auto hi = std::lower_bound(f.values.begin(), f.values.end(), std::make_pair(a, std::uint16_t{0}));
  if (hi == f.values.end()) return std::copysign(f.max_finite, x);  // in (max, max + ulp/2): rounds down
  if (hi->first == a || hi == f.values.begin()) return std::copysign(hi->first, x);
  const auto lo = std::prev(hi);
  const double down = a - lo->first, up = hi->first - a;
  const bool pick_hi = up < down || (up == down && (hi->second & 1) == 0);
  return std::copysign(pick_hi ? hi->first : lo->first, x);
}

std::vector<float> format_edge_cases(const Format& f) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                          static_cast<float>(f.max_finite), static_cast<float>(f.max_finite) * 1.0009f,
                          static_cast<float>(f.max_finite) * 1.01f};
  // Halfway points between neighbours (ties), and points just beside them, across the range
  // and among the subnormals.
  for (std::size_t i = 0; i + 1 < f.values.size(); i += 97) {
    const double mid = (f.values[i].first + f.values[i + 1].first) / 2;
    for (float x : {static_cast<float>(mid), std::nextafter(static_cast<float>(mid), 0.0f),
                    std::nextafter(static_cast<float>(mid), 1e30f)})
      v.push_back(x);
  }
  return v;
}

class HalfFormatTest : public ::testing::TestWithParam<DType> {};

TEST_P(HalfFormatTest, NarrowRoundsToNearestEvenAndWidenIsExact) {
  const Format f = format(GetParam());
  std::vector<float> x = format_edge_cases(f);
  for (float r : test::random_floats(20000, 3, -3.0f, 3.0f)) x.push_back(r * std::exp2(static_cast<float>(
                                                                                  static_cast<int>(r * 13) % 40 - 20)));
  std::vector<std::uint16_t> bits(x.size());
  cpu::narrow(bits.data(), f.dtype, x.data(), static_cast<std::int64_t>(x.size()));
  std::vector<float> back(x.size());
  cpu::widen(back.data(), bits.data(), f.dtype, static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = nearest(f, x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(back[i])) << "NaN must stay NaN";
      continue;
    }
    EXPECT_EQ(static_cast<double>(back[i]), want) << dtype_name(f.dtype) << " of " << x[i];
    EXPECT_EQ(std::signbit(back[i]), std::signbit(x[i])) << "sign of " << x[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfFormatTest, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- ops ----

std::vector<float> rounded(std::vector<float> v, DType t) {
  std::vector<std::uint16_t> bits(v.size());
  cpu::narrow(bits.data(), t, v.data(), static_cast<std::int64_t>(v.size()));
  cpu::widen(v.data(), bits.data(), t, static_cast<std::int64_t>(v.size()));
  return v;
}

// A tensor of dtype t holding v (values already representable in t).
struct Half {
  std::vector<std::uint16_t> bits;
  Tensor tensor;
  Half(const std::vector<float>& v, Shape s, DType t) : bits(v.size()) {
    cpu::narrow(bits.data(), t, v.data(), static_cast<std::int64_t>(v.size()));
    tensor = Tensor(bits.data(), s, t);
  }
  std::vector<float> values() const {
    std::vector<float> v(bits.size());
    cpu::widen(v.data(), bits.data(), tensor.dtype, static_cast<std::int64_t>(v.size()));
    return v;
  }
};

class MixedOpsTest : public ::testing::TestWithParam<DType> {
 protected:
  DType act() const { return GetParam(); }
  // The GPU tests' bounds on the relative error norm of a 16-bit result.
  double tolerance() const { return act() == DType::bf16 ? 2e-2 : 2.5e-3; }
  std::vector<float> values(std::size_t n, std::uint32_t seed) { return rounded(test::random_floats(n, seed), act()); }
  CpuMixedBackend mixed{2};
  CpuBackend fp32{2};
};

// (N, O) = (N, I) @ (O, I)^T in float64
std::vector<double> matmul_nt(const std::vector<float>& x, const std::vector<float>& w, int n, int in, int out) {
  std::vector<double> y(static_cast<std::size_t>(n * out));
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int k = 0; k < in; ++k) s += static_cast<double>(x[i * in + k]) * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}

TEST_P(MixedOpsTest, LinearOpsMatchFloat64) {
  struct Case {
    int n, in, out;
  };
  for (auto [n, in, out] : {Case{1, 1, 1}, Case{7, 13, 11}, Case{64, 96, 80}, Case{200, 256, 704}}) {
    const auto x = values(static_cast<std::size_t>(n * in), 1), w = values(static_cast<std::size_t>(out * in), 2);
    const auto dy = values(static_cast<std::size_t>(n * out), 3);
    Half hx(x, {n, in}, act()), hw(w, {out, in}, act()), hdy(dy, {n, out}, act());
    Half hy(std::vector<float>(static_cast<std::size_t>(n * out)), {n, out}, act());
    mixed.linear_forward(hy.tensor, hx.tensor, hw.tensor);
    EXPECT_LT(test::rel_error(hy.values(), matmul_nt(x, w, n, in, out)), tolerance()) << n << " " << in << " " << out;

    // dx (N, I) = dy (N, O) @ w (O, I): w transposed is (I, O)
    std::vector<float> wt(w.size());
    for (int o = 0; o < out; ++o)
      for (int k = 0; k < in; ++k) wt[k * out + o] = w[o * in + k];
    Half hdx(std::vector<float>(x.size()), {n, in}, act());
    mixed.linear_backward_input(hdx.tensor, hdy.tensor, hw.tensor);
    EXPECT_LT(test::rel_error(hdx.values(), matmul_nt(dy, wt, n, out, in)), tolerance());

    // dw (O, I) += dy^T x, into an fp32 gradient: exact products, fp32 sums, no 16-bit rounding
    std::vector<float> dyt(dy.size()), xt(x.size());
    for (int i = 0; i < n; ++i) {
      for (int o = 0; o < out; ++o) dyt[o * n + i] = dy[i * out + o];
      for (int k = 0; k < in; ++k) xt[k * n + i] = x[i * in + k];
    }
    const auto prior = test::random_floats(w.size(), 4);
    auto dw = prior;
    mixed.linear_backward_weight(test::f32(dw, {out, in}), hdy.tensor, hx.tensor);
    auto want = matmul_nt(dyt, xt, out, n, in);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += prior[i];
    EXPECT_LT(test::rel_error(dw, want), 1e-5) << "an fp32 weight gradient carries no 16-bit rounding";
  }
}

// Everything but the GEMMs is the fp32 op on the widened values, its results rounded once:
// the same bits as rounding the fp32 backend's results.
TEST_P(MixedOpsTest, ElementwiseOpsAreTheFp32OpRoundedOnce) {
  const int rows = 37, dim = 48;
  const auto x = values(rows * dim, 5), weight = values(dim, 6), gate_up = values(rows * 2 * dim, 7);

  Half hx(x, {rows, dim}, act()), hweight(weight, {dim}, act()), hgate_up(gate_up, {rows, 2 * dim}, act());
  Half hout(std::vector<float>(x.size()), {rows, dim}, act());
  std::vector<float> rstd(rows), rstd_ref(rows), out_ref(x.size());
  auto x_copy = x, w_copy = weight;
  mixed.rmsnorm_forward(hout.tensor, test::f32(rstd, {rows}), hx.tensor, hweight.tensor, 1e-5f);
  fp32.rmsnorm_forward(test::f32(out_ref, {rows, dim}), test::f32(rstd_ref, {rows}), test::f32(x_copy, {rows, dim}),
                       test::f32(w_copy, {dim}), 1e-5f);
  EXPECT_EQ(hout.values(), rounded(out_ref, act())) << "rmsnorm out";
  EXPECT_EQ(rstd, rstd_ref) << "rmsnorm rstd stays fp32";

  auto gu_copy = gate_up;
  mixed.swiglu_forward(hout.tensor, hgate_up.tensor);
  fp32.swiglu_forward(test::f32(out_ref, {rows, dim}), test::f32(gu_copy, {rows, 2 * dim}));
  EXPECT_EQ(hout.values(), rounded(out_ref, act())) << "swiglu";

  // In place (out is a): both inputs are read before the result is stored.
  const auto b = values(x.size(), 12);
  auto sum_ref = x, b_copy = b;
  fp32.add(test::f32(sum_ref, {rows, dim}), test::f32(sum_ref, {rows, dim}), test::f32(b_copy, {rows, dim}));
  Half hsum(x, {rows, dim}, act()), hb(b, {rows, dim}, act());
  mixed.add(hsum.tensor, hsum.tensor, hb.tensor);
  EXPECT_EQ(hsum.values(), rounded(sum_ref, act())) << "add in place";
}

TEST_P(MixedOpsTest, CrossEntropyReadsHalfLogitsAndKeepsFp32Statistics) {
  const int rows = 19, vocab = 301;
  const auto logits = values(rows * vocab, 8);
  auto targets = test::random_ids(rows, vocab, 9);
  Half hlogits(logits, {rows, vocab}, act());
  std::vector<float> losses(rows), lse(rows), losses_ref(rows), lse_ref(rows);
  auto logits_copy = logits;
  mixed.cross_entropy_forward(test::f32(losses, {rows}), test::f32(lse, {rows}), hlogits.tensor,
                              test::i32(targets, {rows}));
  fp32.cross_entropy_forward(test::f32(losses_ref, {rows}), test::f32(lse_ref, {rows}),
                             test::f32(logits_copy, {rows, vocab}), test::i32(targets, {rows}));
  EXPECT_EQ(losses, losses_ref);
  EXPECT_EQ(lse, lse_ref);

  // The gradient written over the logits themselves, as the model does.
  std::vector<float> dlogits_ref(logits.size());
  fp32.cross_entropy_backward(test::f32(dlogits_ref, {rows, vocab}), test::f32(logits_copy, {rows, vocab}),
                              test::f32(lse_ref, {rows}), test::i32(targets, {rows}), 0.25f);
  mixed.cross_entropy_backward(hlogits.tensor, hlogits.tensor, test::f32(lse, {rows}), test::i32(targets, {rows}),
                               0.25f);
  EXPECT_EQ(hlogits.values(), rounded(dlogits_ref, act()));
}

TEST_P(MixedOpsTest, Fp32TensorsPassThroughBitForBit) {
  const int n = 33, in = 40, out = 24;
  auto x = test::random_floats(n * in, 10), w = test::random_floats(out * in, 11);
  std::vector<float> y(n * out), y_ref(n * out);
  mixed.linear_forward(test::f32(y, {n, out}), test::f32(x, {n, in}), test::f32(w, {out, in}));
  fp32.linear_forward(test::f32(y_ref, {n, out}), test::f32(x, {n, in}), test::f32(w, {out, in}));
  EXPECT_EQ(y, y_ref);
}

// device.threads below the host's cores holds for oneDNN and the conversions too, which take
// OpenMP's default team: the backend narrows that team for its own calls and restores it.
TEST(CpuThreads, ScopedTeamIsNarrowedAndRestored) {
  const int before = omp_get_max_threads();
  {
    const cpu::ScopedOmpThreads one(1);
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    EXPECT_EQ(team, 1);
  }
  EXPECT_EQ(omp_get_max_threads(), before);

  CpuMixedBackend one_thread(1);
  const int n = 256, in = 256, out = 256;
  Half hx(test::random_floats(n * in, 1), {n, in}, DType::bf16);
  Half hw(test::random_floats(out * in, 2), {out, in}, DType::bf16);
  Half hy(std::vector<float>(n * out), {n, out}, DType::bf16);
  omp_set_num_threads(3);
  one_thread.linear_forward(hy.tensor, hx.tensor, hw.tensor);
  EXPECT_EQ(omp_get_max_threads(), 3) << "the caller's OpenMP setting is left as it was";
  omp_set_num_threads(before);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MixedOpsTest, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace ustrain
