// Fused softmax cross-entropy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

struct CeRef {
  std::vector<double> losses, lse;
};

// logits (N, V), targets (N); rows with target < 0 give 0.
CeRef cross_entropy_ref(const std::vector<double>& z, const std::vector<std::int32_t>& t, int n, int v) {
  CeRef r{std::vector<double>(static_cast<std::size_t>(n)), std::vector<double>(static_cast<std::size_t>(n))};
  for (int i = 0; i < n; ++i) {
    if (t[i] < 0) continue;
    const double* row = z.data() + static_cast<std::size_t>(i * v);
    const double m = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int k = 0; k < v; ++k) sum += std::exp(row[k] - m);
    r.lse[i] = m + std::log(sum);
    r.losses[i] = r.lse[i] - row[t[i]];
  }
  return r;
}

double total_loss(const std::vector<double>& z, const std::vector<std::int32_t>& t, int n, int v, double dloss) {
  double s = 0.0;
  for (double l : cross_entropy_ref(z, t, n, v).losses) s += l;
  return s * dloss;
}

struct Case {
  int n, v;
  float range;
};
// The wide range checks stability: exp of raw logits would overflow.
const Case kCases[] = {{1, 1, 1.0f}, {1, 2, 1.0f}, {7, 31, 3.0f}, {5, 100, 80.0f}, {64, 257, 5.0f}};

std::vector<std::int32_t> targets_with_ignored(int n, int v, std::uint32_t seed) {
  auto t = test::random_ids(static_cast<std::size_t>(n), v, seed);
  for (int i = 2; i < n; i += 3) t[i] = (i % 2) ? -1 : -100;
  return t;
}

TEST(CpuCrossEntropy, ForwardMatchesFloat64) {
  CpuBackend cpu(2);
  for (auto [n, v, range] : kCases) {
    auto z = random_floats(static_cast<std::size_t>(n * v), 1, -range, range);
    auto t = test::random_ids(static_cast<std::size_t>(n), v, 2);
    std::vector<float> losses(static_cast<std::size_t>(n)), lse(static_cast<std::size_t>(n));
    cpu.cross_entropy_forward(test::f32(losses, {n}), test::f32(lse, {n}), test::f32(z, {n, v}), test::i32(t, {n}));
    const auto want = cross_entropy_ref(test::to_double(z), t, n, v);
    EXPECT_LT(test::rel_error(lse, want.lse), test::kForwardTol) << n << "x" << v;
    if (v == 1) {
      for (float l : losses) EXPECT_EQ(l, 0.0f);  // one class: probability 1
    } else {
      EXPECT_LT(test::rel_error(losses, want.losses), test::kForwardTol) << n << "x" << v;
    }
  }
}

TEST(CpuCrossEntropy, BackwardMatchesFiniteDifferences) {
  CpuBackend cpu(2);
  const double dloss = 0.37;
  for (auto [n, v, range] : kCases) {
    if (v == 1) continue;  // the gradient is identically zero
    auto z = random_floats(static_cast<std::size_t>(n * v), 3, -range, range);
    auto t = targets_with_ignored(n, v, 4);
    std::vector<float> losses(static_cast<std::size_t>(n)), lse(static_cast<std::size_t>(n)), dz(z.size());
    cpu.cross_entropy_forward(test::f32(losses, {n}), test::f32(lse, {n}), test::f32(z, {n, v}), test::i32(t, {n}));
    cpu.cross_entropy_backward(test::f32(dz, {n, v}), test::f32(z, {n, v}), test::f32(lse, {n}), test::i32(t, {n}),
                               static_cast<float>(dloss));
    const auto want = test::numeric_gradient(
        [&](const std::vector<double>& zv) { return total_loss(zv, t, n, v, dloss); }, test::to_double(z));
    EXPECT_LT(test::rel_error(dz, want), test::kBackwardTol) << n << "x" << v;
  }
}

TEST(CpuCrossEntropy, IgnoredTargetsGiveZeroLossAndZeroGradient) {
  CpuBackend cpu(2);
  const int n = 9, v = 13;
  auto z = random_floats(n * v, 5, -3.0f, 3.0f);
  auto t = targets_with_ignored(n, v, 6);
  std::vector<float> losses(n, 7.0f), lse(n), dz(z.size(), 7.0f);
  cpu.cross_entropy_forward(test::f32(losses, {n}), test::f32(lse, {n}), test::f32(z, {n, v}), test::i32(t, {n}));
  cpu.cross_entropy_backward(test::f32(dz, {n, v}), test::f32(z, {n, v}), test::f32(lse, {n}), test::i32(t, {n}), 1.0f);
  for (int i = 0; i < n; ++i) {
    if (t[i] >= 0) {
      EXPECT_GT(losses[i], 0.0f);
      continue;
    }
    EXPECT_EQ(losses[i], 0.0f) << i;
    for (int k = 0; k < v; ++k) EXPECT_EQ(dz[i * v + k], 0.0f) << i;
  }
}

TEST(CpuCrossEntropy, InPlaceGradientEqualsOutOfPlace) {
  CpuBackend cpu(2);
  const int n = 40, v = 1000;
  auto z = random_floats(n * v, 7, -4.0f, 4.0f);
  auto t = targets_with_ignored(n, v, 8);
  std::vector<float> losses(n), lse(n), dz(z.size());
  cpu.cross_entropy_forward(test::f32(losses, {n}), test::f32(lse, {n}), test::f32(z, {n, v}), test::i32(t, {n}));
  cpu.cross_entropy_backward(test::f32(dz, {n, v}), test::f32(z, {n, v}), test::f32(lse, {n}), test::i32(t, {n}), 0.5f);
  cpu.cross_entropy_backward(test::f32(z, {n, v}), test::f32(z, {n, v}), test::f32(lse, {n}), test::i32(t, {n}), 0.5f);
  EXPECT_TRUE(test::same_bits(z, dz));
}

TEST(CpuCrossEntropy, DeterministicAcrossThreadCounts) {
  const int n = 64, v = 2000;
  auto z = random_floats(n * v, 9, -4.0f, 4.0f);
  auto t = test::random_ids(n, v, 10);
  std::vector<std::vector<float>> all;
  for (int threads : {1, 2, 3, 2}) {
    std::vector<float> losses(n), lse(n), dz(z.size());
    CpuBackend cpu(threads);
    cpu.cross_entropy_forward(test::f32(losses, {n}), test::f32(lse, {n}), test::f32(z, {n, v}), test::i32(t, {n}));
    cpu.cross_entropy_backward(test::f32(dz, {n, v}), test::f32(z, {n, v}), test::f32(lse, {n}), test::i32(t, {n}),
                               1.0f / n);
    dz.insert(dz.end(), losses.begin(), losses.end());
    all.push_back(dz);
  }
  for (const auto& r : all) EXPECT_TRUE(test::same_bits(r, all[0]));
}

TEST(CpuCrossEntropy, TargetOutsideTheVocabularyIsRejected) {
  CpuBackend cpu(1);
  std::vector<float> z(6, 0.5f), losses(2), lse(2);
  std::vector<std::int32_t> t = {1, 3};
  EXPECT_THROW(
      cpu.cross_entropy_forward(test::f32(losses, {2}), test::f32(lse, {2}), test::f32(z, {2, 3}), test::i32(t, {2})),
      std::logic_error);
}

}  // namespace
}  // namespace ustrain
