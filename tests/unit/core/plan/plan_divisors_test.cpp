// The divisors the planner searches (micro-batches, data-parallel sizes): all of them, in order,
// found from the prime factors rather than by trying every number below n, so that the planner's
// largest batch takes a moment.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/plan/layout_space.h"
#include "core/plan/planner.h"

namespace ustrain {
namespace {

using Ints = std::vector<std::int64_t>;

TEST(PlanDivisors, SmallNumbers) {
  EXPECT_EQ(divisors(1), Ints{1});
  EXPECT_EQ(divisors(7), (Ints{1, 7}));
  EXPECT_EQ(divisors(12), (Ints{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(divisors(36), (Ints{1, 2, 3, 4, 6, 9, 12, 18, 36}));
  EXPECT_EQ(divisors(2 * 1000003), (Ints{1, 2, 1000003, 2 * 1000003}));  // a large prime factor left over
}

TEST(PlanDivisors, EveryDivisorOfEachNumberUpTo2000) {
  for (std::int64_t n = 1; n <= 2000; ++n) {
    Ints expected;
    for (std::int64_t d = 1; d <= n; ++d)
      if (n % d == 0) expected.push_back(d);
    ASSERT_EQ(divisors(n), expected) << n;
  }
}

TEST(PlanDivisors, TheLargestBatchIsQuick) {
  const auto start = std::chrono::steady_clock::now();
  const Ints powers = divisors(kMaxPlanTokens);  // 2^40
  EXPECT_EQ(powers.size(), 41u);
  EXPECT_EQ(powers.back(), kMaxPlanTokens);
  const Ints prime = divisors(1099511627689);  // the largest prime below 2^40
  EXPECT_EQ(prime, (Ints{1, 1099511627689}));
  const Ints product = divisors(std::int64_t{1048573} * 1048571);  // two primes near 2^20
  EXPECT_EQ(product, (Ints{1, 1048571, 1048573, std::int64_t{1048573} * 1048571}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

}  // namespace
}  // namespace ustrain
