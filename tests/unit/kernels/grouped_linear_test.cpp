// Grouped linear layers (a mixture of experts' GEMMs in one call) against float64: groups of
// different sizes, groups of no rows, every row in one group, the weight gradients' accumulation,
// and the recording backend pricing the same per-group GEMMs as separate linear ops.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/record/recording_backend.h"
#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

// Weights (O, I) per group, each its own buffer.
struct Groups {
  std::int64_t in = 0, out = 0;
  std::vector<std::int64_t> offsets;  // (G + 1)
  std::vector<std::vector<float>> weights;
  std::int64_t rows() const { return offsets.back(); }
  std::size_t count() const { return weights.size(); }
  std::vector<Tensor> tensors(std::vector<std::vector<float>>& w) const {
    std::vector<Tensor> t;
    for (auto& v : w) t.push_back(test::f32(v, {out, in}));
    return t;
  }
};

Groups make_groups(const std::vector<std::int64_t>& sizes, std::int64_t in, std::int64_t out, std::uint32_t seed) {
  Groups g{in, out, {0}, {}};
  for (std::int64_t s : sizes) {
    g.offsets.push_back(g.offsets.back() + s);
    g.weights.push_back(random_floats(static_cast<std::size_t>(out * in), seed++));
  }
  return g;
}

// float64, row r of group g: y[r] = x[r] @ w_g^T (forward), dx[r] = dy[r] @ w_g (input
// gradient), dw_g = sum_r dy[r]^T x[r] (weight gradient).
std::vector<double> forward_ref(const Groups& g, const std::vector<float>& x) {
  std::vector<double> y(static_cast<std::size_t>(g.rows() * g.out));
  for (std::size_t k = 0; k < g.count(); ++k)
    for (std::int64_t r = g.offsets[k]; r < g.offsets[k + 1]; ++r)
      for (std::int64_t o = 0; o < g.out; ++o) {
        double s = 0;
        for (std::int64_t i = 0; i < g.in; ++i) s += static_cast<double>(x[r * g.in + i]) * g.weights[k][o * g.in + i];
        y[r * g.out + o] = s;
      }
  return y;
}

std::vector<double> input_grad_ref(const Groups& g, const std::vector<float>& dy) {
  std::vector<double> dx(static_cast<std::size_t>(g.rows() * g.in), 0.0);
  for (std::size_t k = 0; k < g.count(); ++k)
    for (std::int64_t r = g.offsets[k]; r < g.offsets[k + 1]; ++r)
      for (std::int64_t i = 0; i < g.in; ++i) {
        double s = 0;
        for (std::int64_t o = 0; o < g.out; ++o) s += static_cast<double>(dy[r * g.out + o]) * g.weights[k][o * g.in + i];
        dx[r * g.in + i] = s;
      }
  return dx;
}

std::vector<double> weight_grad_ref(const Groups& g, std::size_t k, const std::vector<float>& start,
                                    const std::vector<float>& dy, const std::vector<float>& x) {
  std::vector<double> dw(start.begin(), start.end());
  for (std::int64_t o = 0; o < g.out; ++o)
    for (std::int64_t i = 0; i < g.in; ++i)
      for (std::int64_t r = g.offsets[k]; r < g.offsets[k + 1]; ++r)
        dw[o * g.in + i] += static_cast<double>(dy[r * g.out + o]) * x[r * g.in + i];
  return dw;
}

// Group sizes: mixed with empty groups first, inside and last; every row in one group; none.
const std::vector<std::vector<std::int64_t>> kSizes = {
    {0, 7, 1, 0, 12, 3, 0}, {0, 0, 19, 0}, {5}, {0, 0, 0}};

TEST(GroupedLinear, ForwardMatchesFloat64) {
  CpuBackend cpu(2);
  std::uint32_t seed = 10;
  for (const auto& sizes : kSizes) {
    Groups g = make_groups(sizes, 13, 9, seed);
    seed += 20;
    auto x = random_floats(static_cast<std::size_t>(g.rows() * g.in), seed++);
    std::vector<float> y(static_cast<std::size_t>(g.rows() * g.out), 0.0f);
    cpu.grouped_linear_forward(test::f32(y, {g.rows(), g.out}), test::f32(x, {g.rows(), g.in}), g.tensors(g.weights),
                               g.offsets);
    if (g.rows() > 0) {
      EXPECT_LT(test::rel_error(y, forward_ref(g, x)), test::kForwardTol) << sizes.size();
    }
  }
}

TEST(GroupedLinear, InputGradientMatchesFloat64) {
  CpuBackend cpu(2);
  std::uint32_t seed = 200;
  for (const auto& sizes : kSizes) {
    Groups g = make_groups(sizes, 11, 6, seed);
    seed += 20;
    auto dy = random_floats(static_cast<std::size_t>(g.rows() * g.out), seed++);
    std::vector<float> dx(static_cast<std::size_t>(g.rows() * g.in), 0.0f);
    cpu.grouped_linear_backward_input(test::f32(dx, {g.rows(), g.in}), test::f32(dy, {g.rows(), g.out}),
                                      g.tensors(g.weights), g.offsets);
    if (g.rows() > 0) {
      EXPECT_LT(test::rel_error(dx, input_grad_ref(g, dy)), test::kBackwardTol) << sizes.size();
    }
  }
}

TEST(GroupedLinear, WeightGradientsAccumulateAndEmptyGroupsStayUntouched) {
  CpuBackend cpu(2);
  std::uint32_t seed = 400;
  for (const auto& sizes : kSizes) {
    Groups g = make_groups(sizes, 7, 10, seed);
    seed += 20;
    auto x = random_floats(static_cast<std::size_t>(g.rows() * g.in), seed++);
    auto dy = random_floats(static_cast<std::size_t>(g.rows() * g.out), seed++);
    std::vector<std::vector<float>> dw;  // a running gradient in every group
    for (std::size_t k = 0; k < g.count(); ++k) dw.push_back(random_floats(g.weights[k].size(), seed++));
    const std::vector<std::vector<float>> start = dw;
    const std::vector<Tensor> dw_tensors = g.tensors(dw);
    cpu.grouped_linear_backward_weight(dw_tensors, test::f32(dy, {g.rows(), g.out}), test::f32(x, {g.rows(), g.in}),
                                       g.offsets);
    for (std::size_t k = 0; k < g.count(); ++k) {
      if (g.offsets[k + 1] == g.offsets[k]) {
        EXPECT_TRUE(test::same_bits(dw[k], start[k])) << "empty group " << k << " changed";
      } else {
        EXPECT_LT(test::rel_error(dw[k], weight_grad_ref(g, k, start[k], dy, x)), test::kBackwardTol) << k;
      }
    }
  }
}

// The grouped ops' default runs the per-group linear ops: a planner prices the same GEMMs a
// per-expert loop ran, one linear op per non-empty group.
TEST(GroupedLinear, RecordsOneLinearOpPerNonEmptyGroup) {
  RecordingBackend rec;
  const std::int64_t in = 8, out = 4;
  const std::vector<std::int64_t> offsets{0, 3, 3, 10};
  Tensor x(rec.allocate(10 * in * 4), Shape{10, in}, DType::f32);
  Tensor y(rec.allocate(10 * out * 4), Shape{10, out}, DType::f32);
  std::vector<Tensor> w;
  for (int g = 0; g < 3; ++g) w.emplace_back(rec.allocate(out * in * 4), Shape{out, in}, DType::f32);
  rec.grouped_linear_forward(y, x, w, offsets);
  rec.grouped_linear_backward_input(x, y, w, offsets);
  rec.grouped_linear_backward_weight(w, y, x, offsets);
  const std::vector<const char*> names{"linear_forward", "linear_backward_input", "linear_backward_weight"};
  ASSERT_EQ(rec.ops().size(), 6u);
  for (std::size_t i = 0; i < rec.ops().size(); ++i) {
    const RecordedOp& op = rec.ops()[i];
    EXPECT_STREQ(op.name, names[i / 2]);
    const std::int64_t rows = i % 2 == 0 ? 3 : 7;
    EXPECT_EQ(op.flops, 2 * rows * in * out) << op.name;
  }
}

}  // namespace
}  // namespace ustrain
