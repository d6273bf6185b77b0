// AdamW with decoupled weight decay, against a float64 optimizer.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

struct AdamState {
  std::vector<double> p, m, v;
};

void adamw_ref(AdamState& s, const std::vector<double>& g, const AdamWParams& hp) {
  const double b1 = hp.beta1, b2 = hp.beta2;
  for (std::size_t i = 0; i < s.p.size(); ++i) {
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * g[i];
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * g[i] * g[i];
    const double m_hat = s.m[i] / (1.0 - std::pow(b1, static_cast<double>(hp.step)));
    const double v_hat = s.v[i] / (1.0 - std::pow(b2, static_cast<double>(hp.step)));
    s.p[i] -= static_cast<double>(hp.lr) * (m_hat / (std::sqrt(v_hat) + hp.eps) + hp.weight_decay * s.p[i]);
  }
}

// Runs `steps` optimizer steps with fresh random gradients and compares the parameters'
// total change, and the moments, with the float64 optimizer.
void check_steps(int steps, float weight_decay, std::size_t n) {
  CpuBackend cpu(2);
  AdamWParams hp;
  hp.lr = 1e-2f;
  hp.weight_decay = weight_decay;
  auto p = random_floats(n, 1);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  const auto p0 = test::to_double(p);
  AdamState ref{p0, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  const auto len = static_cast<std::int64_t>(n);
  for (int step = 1; step <= steps; ++step) {
    hp.step = step;
    auto g = random_floats(n, 100 + static_cast<std::uint32_t>(step), -0.5f, 0.5f);
    cpu.adamw(test::f32(p, {len}), test::f32(g, {len}), test::f32(m, {len}), test::f32(v, {len}), hp);
    adamw_ref(ref, test::to_double(g), hp);
  }
  std::vector<double> got_change(n), want_change(n);
  for (std::size_t i = 0; i < n; ++i) {
    got_change[i] = static_cast<double>(p[i]) - p0[i];
    want_change[i] = ref.p[i] - p0[i];
  }
  const std::string what = std::to_string(steps) + " steps, weight decay " + std::to_string(weight_decay);
  EXPECT_LT(test::rel_error(got_change, want_change), test::kBackwardTol) << what;
  EXPECT_LT(test::rel_error(p, ref.p), test::kForwardTol) << what;
  EXPECT_LT(test::rel_error(m, ref.m), test::kForwardTol) << what;
  EXPECT_LT(test::rel_error(v, ref.v), test::kForwardTol) << what;
}

TEST(CpuAdamW, OneStepWithoutWeightDecay) { check_steps(1, 0.0f, 1000); }
TEST(CpuAdamW, OneStepWithWeightDecay) { check_steps(1, 0.1f, 1000); }
TEST(CpuAdamW, SeveralStepsWithoutWeightDecay) { check_steps(7, 0.0f, 50001); }
TEST(CpuAdamW, SeveralStepsWithWeightDecay) { check_steps(7, 0.1f, 13); }

TEST(CpuAdamW, FirstStepMovesEachParameterByAboutLr) {
  // With m = v = 0 the bias-corrected first step is lr * g / (|g| + eps): a step of lr
  // against the sign of the gradient (plus decay).
  CpuBackend cpu(1);
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, g = {0.3f, -0.01f, 2.0f}, m(3, 0.0f), v(3, 0.0f);
  AdamWParams hp;
  hp.lr = 0.1f;
  hp.weight_decay = 0.5f;
  cpu.adamw(test::f32(p, {3}), test::f32(g, {3}), test::f32(m, {3}), test::f32(v, {3}), hp);
  EXPECT_NEAR(p[0], 1.0 - 0.1 * (1.0 + 0.5 * 1.0), 1e-6);
  EXPECT_NEAR(p[1], -2.0 - 0.1 * (-1.0 + 0.5 * -2.0), 1e-6);
  EXPECT_NEAR(p[2], 0.5 - 0.1 * (1.0 + 0.5 * 0.5), 1e-6);
}

// The gradient scale and the compute copy fold two passes into the update: the same bits as
// scale() first and convert() after.
TEST(CpuAdamW, GradScaleAndComputeCopyEqualTheirOwnPasses) {
  CpuBackend cpu(2);
  const std::size_t n = 5000;
  const auto len = static_cast<std::int64_t>(n);
  AdamWParams hp;
  hp.lr = 1e-2f;
  hp.weight_decay = 0.1f;
  auto fused_p = random_floats(n, 3), g = random_floats(n, 4, -3.0f, 3.0f);
  auto passes_p = fused_p, passes_g = g;
  std::vector<float> fused_m(n, 0.0f), fused_v(n, 0.0f), passes_m(n, 0.0f), passes_v(n, 0.0f);
  std::vector<std::uint16_t> fused_copy(n, 0), passes_copy(n, 0);
  for (std::int64_t step = 1; step <= 3; ++step) {
    hp.step = step;
    hp.grad_scale = 1.0f;
    cpu.scale(test::f32(passes_g, {len}), 0.37f);
    cpu.adamw(test::f32(passes_p, {len}), test::f32(passes_g, {len}), test::f32(passes_m, {len}),
              test::f32(passes_v, {len}), hp);
    cpu.convert(Tensor(passes_copy.data(), Shape{len}, DType::bf16), test::f32(passes_p, {len}));
    hp.grad_scale = 0.37f;
    const AdamWTensors range{test::f32(fused_p, {len}), test::f32(g, {len}), test::f32(fused_m, {len}),
                             test::f32(fused_v, {len}), hp.weight_decay,
                             Tensor(fused_copy.data(), Shape{len}, DType::bf16)};
    cpu.adamw_multi(std::span(&range, 1), hp);
    passes_g = g;  // the fused update leaves the gradients as they were
  }
  EXPECT_EQ(fused_p, passes_p);
  EXPECT_EQ(fused_m, passes_m);
  EXPECT_EQ(fused_v, passes_v);
  EXPECT_EQ(fused_copy, passes_copy);
}

}  // namespace
}  // namespace ustrain
