// The seeded random streams (core/model/rng.h): published SplitMix64 outputs, moments,
// independence of neighbouring streams, and fills that do not depend on partitioning.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/model/rng.h"

namespace ustrain {
namespace {

TEST(Rng, MatchesPublishedSplitMix64Outputs) {
  // First outputs of the reference splitmix64 generator seeded with 0.
  Rng rng(0);
  EXPECT_EQ(rng.next_u64(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.next_u64(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng.next_u64(), 0x06C45D188009454FULL);
  EXPECT_EQ(mix64(0x9e3779b97f4a7c15ULL), 0xE220A8397B1DCDAFULL);
}

TEST(Rng, HashStringIsFnv1aThenMix) {
  // Published FNV-1a 64 values of "" (the offset basis) and "a".
  EXPECT_EQ(hash_string(""), mix64(0xcbf29ce484222325ULL));
  EXPECT_EQ(hash_string("a"), mix64(0xaf63dc4c8601ec8cULL));
  EXPECT_NE(hash_string("layers.0.wq"), hash_string("layers.0.wk"));
}

TEST(Rng, StateRoundTripsForCheckpoints) {
  Rng rng(1234);
  EXPECT_EQ(rng.state(), 1234u);
  rng.next_u64();
  const std::uint64_t saved = rng.state();
  std::vector<std::uint64_t> first;
  for (int i = 0; i < 5; ++i) first.push_back(rng.next_u64());
  Rng resumed(99);
  resumed.set_state(saved);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(resumed.next_u64(), first[i]);
}

TEST(Rng, SequentialUniformsLieInRangeWithTheRightMean) {
  Rng rng(7);
  const int n = 200000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of n uniforms: standard error sqrt(1/12/n); allow 5 of them.
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12.0 / n));
}

TEST(Rng, CounterUniformsLieInRangeWithTheRightMean) {
  const int n = 200000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double u = uniform_at(42, static_cast<std::uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12.0 / n));
}

TEST(Rng, NormalsHaveStandardMoments) {
  const int n = 1000000;
  const std::uint64_t stream = 2024 ^ hash_string("embedding");
  double sum = 0, sum_sq = 0, sum_fourth = 0;
  int beyond_196 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = normal_at(stream, static_cast<std::uint64_t>(i));
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum_sq += x * x;
    sum_fourth += x * x * x * x;
    if (std::fabs(x) > 1.959963984540054) ++beyond_196;
  }
  const double mean = sum / n;
  const double variance = sum_sq / n - mean * mean;
  // Bounds are 5 standard errors: mean sd 1/sqrt(n); variance sd sqrt(2/n);
  // fourth moment (3 for a normal) sd sqrt((105 - 9)/n); a two-sided 5% tail.
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(double(n)));
  EXPECT_NEAR(variance, 1.0, 5 * std::sqrt(2.0 / n));
  EXPECT_NEAR(sum_fourth / n, 3.0, 5 * std::sqrt(96.0 / n));
  EXPECT_NEAR(double(beyond_196) / n, 0.05, 5 * std::sqrt(0.05 * 0.95 / n));
}

// Sample correlation of two equally long sequences.
double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sa += a[i], sb += b[i], saa += a[i] * a[i], sbb += b[i] * b[i], sab += a[i] * b[i];
  }
  const double cov = sab / n - sa / n * sb / n;
  return cov / std::sqrt((saa / n - sa / n * sa / n) * (sbb / n - sb / n * sb / n));
}

TEST(Rng, NeighbouringStreamsAndIndicesAreUncorrelated) {
  const int n = 100000;
  std::vector<double> s0(n), s1(n), next(n);
  for (int i = 0; i < n; ++i) {
    s0[i] = normal_at(5, static_cast<std::uint64_t>(i));
    s1[i] = normal_at(6, static_cast<std::uint64_t>(i));
    next[i] = normal_at(5, static_cast<std::uint64_t>(i) + 1);
  }
  // Under independence the correlation has standard error about 1/sqrt(n).
  EXPECT_NEAR(correlation(s0, s1), 0.0, 5 / std::sqrt(double(n)));
  EXPECT_NEAR(correlation(s0, next), 0.0, 5 / std::sqrt(double(n)));
}

TEST(Rng, CounterValuesAreDeterministic) {
  EXPECT_EQ(normal_at(11, 3), normal_at(11, 3));
  EXPECT_EQ(uniform_at(11, 3), uniform_at(11, 3));
  EXPECT_NE(normal_at(11, 3), normal_at(12, 3));
  EXPECT_NE(normal_at(11, 3), normal_at(11, 4));
}

TEST(Rng, FillNormalDoesNotDependOnPartitioning) {
  const std::size_t n = 1001;
  const std::uint64_t stream = 77 ^ hash_string("layers.3.w_up");
  const double init_std = 0.02;
  std::vector<float> whole(n), pieces(n);
  fill_normal(whole.data(), n, stream, init_std);
  // Three uneven shards, as three ranks would fill them, in a different order.
  fill_normal(pieces.data() + 700, n - 700, stream, init_std, 700);
  fill_normal(pieces.data(), 333, stream, init_std, 0);
  fill_normal(pieces.data() + 333, 367, stream, init_std, 333);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(whole[i], pieces[i]) << "element " << i;
    ASSERT_EQ(whole[i], static_cast<float>(init_std * normal_at(stream, i))) << "element " << i;
  }
}

}  // namespace
}  // namespace ustrain
