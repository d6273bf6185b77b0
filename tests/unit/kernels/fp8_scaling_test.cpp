// The FP8 scaling recipes (kernels/fp8/fp8_scaling.h, fp8_layers.h) against a float64
// reference on random tensors with outliers: each recipe's scales (groups, formula, powers of
// two), the quantise-dequantise, delayed scaling's amax history; and CpuFp8Backend's GEMMs
// against a float64 GEMM of the dequantised operands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_fp8_backend.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/fp8/fp8_layers.h"
#include "kernels/fp8/fp8_scaling.h"

namespace ustrain::fp8 {
namespace {

// Normal values with a few outliers 1000x larger, rounded through bf16 (what the GEMMs get).
std::vector<float> with_outliers(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<std::int64_t> at(0, n - 1);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = normal(rng);
  for (int i = 0; i < 5; ++i) x[static_cast<std::size_t>(at(rng))] *= 1000.0f;
  for (float& v : x) v = cpu::bf16_to_float(cpu::float_to_bf16(v));
  return x;
}

// The reference: the scale of each element's group, in float64 from the group's amax.
std::vector<double> reference_scales(const Config& c, const Operand& op) {
  auto group_of = [&](std::int64_t r, std::int64_t col) -> std::pair<std::int64_t, std::int64_t> {
    switch (c.recipe) {
      case Recipe::delayed:
      case Recipe::current: return {0, 0};
      case Recipe::rowwise: return op.k_in_cols ? std::pair{r, std::int64_t{0}} : std::pair{std::int64_t{0}, col};
      case Recipe::blockwise:
        if (op.role == Role::weight) return {r / 128, col / 128};
        return op.k_in_cols ? std::pair{r, col / 128} : std::pair{r / 128, col};
    }
    return {0, 0};
  };
  std::map<std::pair<std::int64_t, std::int64_t>, double> amax;
  for (std::int64_t r = 0; r < op.rows; ++r)
    for (std::int64_t col = 0; col < op.cols; ++col) {
      double& m = amax[group_of(r, col)];
      m = std::max(m, std::fabs(static_cast<double>(op.data[r * op.cols + col])));
    }
  const double max = format_of(c, op.role) == Format::e4m3 ? 448.0 : 57344.0;
  std::vector<double> s(static_cast<std::size_t>(op.rows * op.cols));
  for (std::int64_t r = 0; r < op.rows; ++r)
    for (std::int64_t col = 0; col < op.cols; ++col) {
      const double a = amax[group_of(r, col)];
      double v = a > 0 ? max / a / std::ldexp(1.0, c.margin) : 1.0;
      if (c.recipe == Recipe::rowwise || c.recipe == Recipe::blockwise) v = std::exp2(std::floor(std::log2(v)));
      s[static_cast<std::size_t>(r * op.cols + col)] = v;
    }
  return s;
}

struct Case {
  Recipe recipe;
  Role role;
  bool k_in_cols;
};

class Fp8Scales : public ::testing::TestWithParam<Case> {};

TEST_P(Fp8Scales, MatchTheReferenceAndQuantiseWithThem) {
  const Case k = GetParam();
  for (const int margin : {0, 2}) {
    const Config c{k.recipe, Format::e5m2, 16, margin};
    const std::int64_t rows = 300, cols = 260;  // partial 128-blocks at the edges
    const std::vector<float> x = with_outliers(rows * cols, 11);
    const Operand op{x.data(), rows, cols, k.k_in_cols, k.role};
    const ScaleGrid grid = scales_now(c, op);
    const std::vector<double> want = reference_scales(c, op);
    std::vector<float> q(x.size());
    quantize_dequantize(q.data(), op, grid, format_of(c, k.role));
    const Format f = format_of(c, k.role);
    int distinct = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t col = 0; col < cols; ++col) {
        const auto i = static_cast<std::size_t>(r * cols + col);
        ASSERT_EQ(static_cast<double>(grid.at(r, col)), static_cast<double>(static_cast<float>(want[i])))
            << recipe_name(k.recipe) << " at " << r << "," << col;
        const float s = static_cast<float>(want[i]);
        const float expect = round_to(f, x[i] * s, true) * (1.0f / s);
        ASSERT_EQ(q[i], expect) << r << "," << col;
        // No element saturates: the scale maps each group's amax onto the format's range.
        ASSERT_LE(std::fabs(x[i] * s), max_finite(f) * 1.0001f);
        distinct += grid.at(r, col) != grid.at(0, 0);
      }
    // Finer recipes isolate the outliers: most groups get larger scales than the worst one.
    if (k.recipe == Recipe::rowwise || k.recipe == Recipe::blockwise) {
      EXPECT_GT(distinct, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, Fp8Scales,
    ::testing::Values(Case{Recipe::current, Role::activation, true}, Case{Recipe::current, Role::gradient, false},
                      Case{Recipe::rowwise, Role::activation, true}, Case{Recipe::rowwise, Role::weight, false},
                      Case{Recipe::rowwise, Role::gradient, false}, Case{Recipe::blockwise, Role::activation, true},
                      Case{Recipe::blockwise, Role::gradient, false}, Case{Recipe::blockwise, Role::weight, true},
                      Case{Recipe::blockwise, Role::weight, false}));

TEST(Fp8Scales, AmaxZeroOrNotFiniteKeepsTheScale) {
  EXPECT_EQ(scale_for_amax(0.0f, Format::e4m3, 0, 3.0f), 3.0f);
  EXPECT_EQ(scale_for_amax(NAN, Format::e4m3, 0, 3.0f), 3.0f);
  EXPECT_EQ(scale_for_amax(INFINITY, Format::e4m3, 0, 3.0f), 3.0f);
  EXPECT_EQ(scale_for_amax(2.0f, Format::e4m3, 1, 3.0f), 112.0f);
  EXPECT_EQ(scale_for_amax(1e-40f, Format::e5m2, 0, 1.0f), std::numeric_limits<float>::max());
  EXPECT_EQ(power_of_two_at_most(112.0f), 64.0f);
  EXPECT_EQ(power_of_two_at_most(64.0f), 64.0f);
}

// Delayed scaling: the first scale is 1; each step's amax (the largest of its calls) enters a
// history of `history` steps, and the next scale comes from the history's largest.
TEST(Fp8DelayedScaling, FollowsTheAmaxHistory) {
  const Config c{Recipe::delayed, Format::e5m2, 4, 0};
  LayerScaling s(c);
  EXPECT_EQ(LayerScaling::floats(c), 3 * (4 + 2));
  EXPECT_EQ(s.scale(Role::activation), 1.0f);
  const std::vector<float> amax{8.0f, 2.0f, 1.0f, 4.0f, 0.5f, 0.25f, 0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<double> seen;
  float previous_grad = 1.0f;
  for (std::size_t step = 0; step < amax.size(); ++step) {
    s.record(Role::activation, amax[step] / 2);
    s.record(Role::activation, amax[step]);  // a second micro-batch: the larger counts
    s.record(Role::gradient, amax[step]);
    s.end_step(c);
    seen.push_back(amax[step]);
    double m = 0;
    for (std::size_t i = seen.size() > 4 ? seen.size() - 4 : 0; i < seen.size(); ++i) m = std::max(m, seen[i]);
    const float want_act = m > 0 ? static_cast<float>(448.0 / m) : s.scale(Role::activation);
    const float want_grad = m > 0 ? static_cast<float>(57344.0 / m) : previous_grad;
    EXPECT_EQ(s.scale(Role::activation), want_act) << "step " << step;
    EXPECT_EQ(s.scale(Role::gradient), want_grad) << "step " << step;
    EXPECT_EQ(s.scale(Role::weight), 1.0f);  // nothing recorded: the first scale stays
    previous_grad = s.scale(Role::gradient);
  }
  EXPECT_EQ(s.scale(Role::gradient), 57344.0f / 0.25f);  // an all-zero history keeps the last scale
}

TEST(Fp8Layers, OnlyDelayedScalingKeepsState) {
  int key = 0;
  Fp8Layers delayed({Recipe::delayed, Format::e5m2, 8, 0});
  delayed.add(&key, "w");
  ASSERT_EQ(delayed.by_name().size(), 1u);
  EXPECT_EQ(delayed.by_name().at("w")->values().size(), 30u);
  Fp8Layers current({Recipe::current, Format::e5m2, 8, 0});
  current.add(&key, "w");
  EXPECT_NE(current.find(&key), nullptr);
  EXPECT_TRUE(current.by_name().empty());
  EXPECT_EQ(current.find(&delayed), nullptr);
}

// A backend that records amaxes off the host (the GPU's) is told when a step begins, asked for
// the step's amaxes once, and sees the generation move whenever the scales may have changed.
class RecordedAmaxes : public AmaxSource {
 public:
  void discard() override { ++discarded; }
  void record_into(Fp8Layers& layers) override {
    for (auto& [name, s] : layers.by_name()) s->record(Role::gradient, 5.0f);
  }
  int discarded = 0;
};

TEST(Fp8Layers, AnAmaxSourceIsDroppedAtAStepsStartAndCollectedAtItsEnd) {
  int key = 0;
  Fp8Layers layers({Recipe::delayed, Format::e5m2, 4, 0});
  layers.add(&key, "w");
  RecordedAmaxes source;
  layers.set_amax_source(&source);
  const std::uint64_t g0 = layers.generation();
  layers.begin_step();
  EXPECT_EQ(source.discarded, 1);
  EXPECT_NE(layers.generation(), g0);
  const std::uint64_t g1 = layers.generation();
  layers.collect_amaxes();
  EXPECT_EQ(layers.find(&key)->pending()[static_cast<int>(Role::gradient)], 5.0f);
  layers.end_step();
  EXPECT_NE(layers.generation(), g1);
  EXPECT_EQ(layers.find(&key)->scale(Role::gradient), 57344.0f / 5.0f);  // the collected amax counted
}

// ---- CpuFp8Backend: the GEMMs of added layers on the dequantised operands ----

std::vector<std::uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<std::uint16_t> b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) b[i] = cpu::float_to_bf16(x[i]);
  return b;
}

std::vector<float> qdq(const Config& c, std::vector<float> x, std::int64_t rows, std::int64_t cols, bool k_in_cols,
                       Role role) {
  const Operand op{x.data(), rows, cols, k_in_cols, role};
  std::vector<float> out(x.size());
  quantize_dequantize(out.data(), op, scales_now(c, op), format_of(c, role));
  return out;
}

TEST(CpuFp8Backend, GemmsMultiplyTheDequantisedOperands) {
  const std::int64_t n = 64, in = 160, outs = 96;
  const std::vector<float> x = with_outliers(n * in, 1), w = with_outliers(outs * in, 2), d = with_outliers(n * outs, 3);
  std::vector<std::uint16_t> xb = to_bf16(x), wb = to_bf16(w), db = to_bf16(d);
  for (const Recipe recipe : {Recipe::current, Recipe::rowwise, Recipe::blockwise}) {
    const Config c{recipe, Format::e5m2, 8, 0};
    CpuFp8Backend be(1, c);
    std::vector<float> dw(static_cast<std::size_t>(outs * in), 0.0f);
    be.fp8_layers()->add(wb.data(), "w");
    be.fp8_layers()->add(dw.data(), "w.wgrad");
    std::vector<std::uint16_t> out(static_cast<std::size_t>(n * outs)), dx(static_cast<std::size_t>(n * in));
    be.linear_forward(Tensor(out.data(), Shape{n, outs}, DType::bf16), Tensor(xb.data(), Shape{n, in}, DType::bf16),
                      Tensor(wb.data(), Shape{outs, in}, DType::bf16));
    be.linear_backward_input(Tensor(dx.data(), Shape{n, in}, DType::bf16), Tensor(db.data(), Shape{n, outs}, DType::bf16),
                             Tensor(wb.data(), Shape{outs, in}, DType::bf16));
    be.linear_backward_weight(Tensor(dw.data(), Shape{outs, in}), Tensor(db.data(), Shape{n, outs}, DType::bf16),
                              Tensor(xb.data(), Shape{n, in}, DType::bf16));
    // float64 GEMMs of the operands each quantised along its reduction axis
    const auto qx = qdq(c, x, n, in, true, Role::activation), qw = qdq(c, w, outs, in, true, Role::weight);
    const auto qd = qdq(c, d, n, outs, true, Role::gradient), qwt = qdq(c, w, outs, in, false, Role::weight);
    const auto qdt = qdq(c, d, n, outs, false, Role::gradient), qxt = qdq(c, x, n, in, false, Role::activation);
    int differs_from_bf16 = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t o = 0; o < outs; ++o) {
        double s = 0, exact = 0;
        for (std::int64_t k = 0; k < in; ++k) {
          s += static_cast<double>(qx[i * in + k]) * qw[o * in + k];
          exact += static_cast<double>(x[i * in + k]) * w[o * in + k];
        }
        const float got = cpu::bf16_to_float(out[static_cast<std::size_t>(i * outs + o)]);
        ASSERT_NEAR(got, s, 1e-2 * std::fabs(s) + 1e-3) << recipe_name(recipe);  // one bf16 rounding
        differs_from_bf16 += std::fabs(got - exact) > 1e-2 * std::fabs(exact) + 1e-3;
      }
    EXPECT_GT(differs_from_bf16, 0) << "FP8 quantisation changed nothing";
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < in; ++k) {
        double s = 0;
        for (std::int64_t o = 0; o < outs; ++o) s += static_cast<double>(qd[i * outs + o]) * qwt[o * in + k];
        ASSERT_NEAR(cpu::bf16_to_float(dx[static_cast<std::size_t>(i * in + k)]), s, 1e-2 * std::fabs(s) + 1e-3);
      }
    for (std::int64_t o = 0; o < outs; ++o)
      for (std::int64_t k = 0; k < in; ++k) {
        double s = 0;
        for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(qdt[i * outs + o]) * qxt[i * in + k];
        ASSERT_NEAR(dw[static_cast<std::size_t>(o * in + k)], s, 1e-4 * std::fabs(s) + 1e-3);  // fp32 result
      }
  }
}

// Delayed scaling through the backend: a step's GEMMs quantise with the state's scales and
// record each operand's amax; the step's end turns them into the next scales.
TEST(CpuFp8Backend, DelayedScalingRecordsAmaxesAndUsesTheStatesScales) {
  const std::int64_t n = 8, in = 16, outs = 4;
  const std::vector<float> x = with_outliers(n * in, 6), w = with_outliers(outs * in, 7);
  std::vector<std::uint16_t> xb = to_bf16(x), wb = to_bf16(w), out(static_cast<std::size_t>(n * outs));
  const Config c{Recipe::delayed, Format::e5m2, 4, 0};
  CpuFp8Backend be(1, c);
  be.fp8_layers()->add(wb.data(), "w");
  LayerScaling& state = *be.fp8_layers()->find(wb.data());
  auto forward = [&] {
    be.linear_forward(Tensor(out.data(), Shape{n, outs}, DType::bf16), Tensor(xb.data(), Shape{n, in}, DType::bf16),
                      Tensor(wb.data(), Shape{outs, in}, DType::bf16));
  };
  auto amax = [](const std::vector<float>& v) {
    float m = 0;
    for (float e : v) m = std::max(m, std::fabs(e));
    return m;
  };
  // out[0, 0] from operands quantised with scales sx and sw
  auto first_output = [&](float sx, float sw) {
    double s = 0;
    for (std::int64_t k = 0; k < in; ++k)
      s += static_cast<double>(round_to(Format::e4m3, x[k] * sx, true) * (1.0f / sx)) *
           (round_to(Format::e4m3, w[k] * sw, true) * (1.0f / sw));
    return cpu::bf16_to_float(cpu::float_to_bf16(static_cast<float>(s)));
  };
  be.fp8_layers()->begin_step();
  forward();
  EXPECT_EQ(state.pending()[static_cast<int>(Role::activation)], amax(x));
  EXPECT_EQ(state.pending()[static_cast<int>(Role::weight)], amax(w));
  EXPECT_NEAR(cpu::bf16_to_float(out[0]), first_output(1.0f, 1.0f), 1e-6 + 1e-2 * std::fabs(first_output(1.0f, 1.0f)));
  be.fp8_layers()->end_step();
  const float sx = 448.0f / amax(x), sw = 448.0f / amax(w);
  EXPECT_EQ(state.scale(Role::activation), sx);
  EXPECT_EQ(state.scale(Role::weight), sw);
  forward();
  EXPECT_NEAR(cpu::bf16_to_float(out[0]), first_output(sx, sw), 1e-6 + 1e-2 * std::fabs(first_output(sx, sw)));
  // A validation pass's amaxes are forgotten when the next step begins.
  be.fp8_layers()->begin_step();
  EXPECT_EQ(state.pending()[static_cast<int>(Role::activation)], 0.0f);
}

TEST(CpuFp8Backend, LayersNotAddedComputeInBf16) {
  const std::int64_t n = 16, in = 32, outs = 8;
  const std::vector<float> x = with_outliers(n * in, 4), w = with_outliers(outs * in, 5);
  std::vector<std::uint16_t> xb = to_bf16(x), wb = to_bf16(w);
  std::vector<std::uint16_t> a(static_cast<std::size_t>(n * outs)), b(a.size());
  CpuFp8Backend fp8(1, {Recipe::current, Format::e5m2, 8, 0});
  CpuMixedBackend bf16(1);
  fp8.linear_forward(Tensor(a.data(), Shape{n, outs}, DType::bf16), Tensor(xb.data(), Shape{n, in}, DType::bf16),
                     Tensor(wb.data(), Shape{outs, in}, DType::bf16));
  bf16.linear_forward(Tensor(b.data(), Shape{n, outs}, DType::bf16), Tensor(xb.data(), Shape{n, in}, DType::bf16),
                      Tensor(wb.data(), Shape{outs, in}, DType::bf16));
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ustrain::fp8
