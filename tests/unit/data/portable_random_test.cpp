// The portable generator against published SplitMix64 values, and the properties the loader
// and the train/val split rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/files/portable_random.h"

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

std::vector<std::uint64_t> permutation(std::uint64_t n, std::uint64_t seed) {
  const IndexPermutation p(n, seed);
  std::vector<std::uint64_t> order(n);
  for (std::uint64_t i = 0; i < n; ++i) order[i] = p(i);
  return order;
}

TEST(DataPortableRandom, IndexPermutationIsABijectionForAnySize) {
  for (std::uint64_t n : {1u, 2u, 3u, 4u, 5u, 17u, 64u, 65u, 1000u, 4097u}) {
    std::vector<std::uint64_t> sorted = permutation(n, 42);
    std::sort(sorted.begin(), sorted.end());
    for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "n = " << n;
  }
}

TEST(DataPortableRandom, IndexPermutationIsDeterministicAndSeedDependent) {
  EXPECT_EQ(permutation(1000, 42), permutation(1000, 42));
  EXPECT_NE(permutation(1000, 42), permutation(1000, 43));
  // Large sizes cost nothing up front: any position is computed on its own.
  const IndexPermutation huge(std::uint64_t{1} << 40, 7);
  EXPECT_LT(huge(123456789), std::uint64_t{1} << 40);
  EXPECT_NE(huge(0), huge(1));
}

TEST(DataPortableRandom, IndexPermutationLooksUniform) {
  // Where element 0 lands, over 4000 seeds, in 10 buckets of a 100-element permutation:
  // 400 expected per bucket; 300 is five standard deviations below.
  std::vector<int> buckets(10, 0);
  for (std::uint64_t seed = 0; seed < 4000; ++seed) {
    const IndexPermutation p(100, seed);
    for (std::uint64_t i = 0; i < 100; ++i)
      if (p(i) == 0) ++buckets[i / 10];
  }
  for (int count : buckets) EXPECT_GT(count, 300);
  // Neighbours stay neighbours no more often than chance (about 2 of 1000 for one seed).
  const std::vector<std::uint64_t> order = permutation(1000, 5);
  int adjacent = 0;
  for (std::size_t i = 0; i + 1 < order.size(); ++i) adjacent += order[i] + 1 == order[i + 1];
  EXPECT_LT(adjacent, 10);
}

TEST(DataPortableRandom, DerivedSeedsDifferPerStream) {
  std::set<std::uint64_t> seeds;
  for (std::uint64_t stream = 0; stream < 1000; ++stream) seeds.insert(SplitMix64::derive(5, stream));
  EXPECT_EQ(seeds.size(), 1000u);
  EXPECT_NE(SplitMix64::derive(5, 0), SplitMix64::derive(6, 0));
}

}  // namespace
}  // namespace ustrain
