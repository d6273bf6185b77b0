// The portable generator against published SplitMix64 values, and the properties the loader
// and the train/val split rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/portable_random.h"

namespace ustrain {
namespace {

TEST(DataPortableRandom, SplitMix64MatchesPublishedSequence) {
  // First outputs for seed 1234567 in the reference SplitMix64 (Steele, Lea, Flood; Vigna's C code).
  SplitMix64 rng(1234567);
  EXPECT_EQ(rng.next(), 6457827717110365317ull);
  EXPECT_EQ(rng.next(), 3203168211198807973ull);
  EXPECT_EQ(rng.next(), 9817491932198370423ull);
  EXPECT_EQ(rng.next(), 4593380528125082431ull);
  EXPECT_EQ(rng.next(), 16408922859458223821ull);
}

TEST(DataPortableRandom, BelowStaysInRangeAndReachesEveryValue) {
  SplitMix64 rng(7);
  std::vector<int> seen(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const std::uint64_t value = rng.below(7);
    ASSERT_LT(value, 7u);
    ++seen[value];
  }
  // Each residue expects 1000 hits; 800 is more than six standard deviations below.
  for (int count : seen) EXPECT_GT(count, 800);
  EXPECT_EQ(rng.below(1), 0u);
  // A bound just above 2^63 rejects nearly half the draws; it must still terminate in range.
  const std::uint64_t huge = (1ull << 63) + 12345;
  for (int i = 0; i < 100; ++i) EXPECT_LT(rng.below(huge), huge);
}

TEST(DataPortableRandom, UnitIsInHalfOpenInterval) {
  SplitMix64 rng(99);
  double low = 1, high = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    low = std::min(low, u);
    high = std::max(high, u);
  }
  EXPECT_LT(low, 0.01);
  EXPECT_GT(high, 0.99);
}

TEST(DataPortableRandom, PermutationIsDeterministicAndSeedDependent) {
  const auto a = portable_permutation(1000, 42);
  const auto b = portable_permutation(1000, 42);
  const auto c = portable_permutation(1000, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<std::uint64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint64_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_TRUE(portable_permutation(0, 1).empty());
  EXPECT_EQ(portable_permutation(1, 1), std::vector<std::uint64_t>{0});
}

TEST(DataPortableRandom, DerivedSeedsDifferPerStream) {
  std::set<std::uint64_t> seeds;
  for (std::uint64_t stream = 0; stream < 1000; ++stream) seeds.insert(SplitMix64::derive(5, stream));
  EXPECT_EQ(seeds.size(), 1000u);
  EXPECT_NE(SplitMix64::derive(5, 0), SplitMix64::derive(6, 0));
}

}  // namespace
}  // namespace ustrain
