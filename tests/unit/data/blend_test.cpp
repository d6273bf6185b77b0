// Blend specs and the interleaving schedule (data/loading/blend.h).
#include <gtest/gtest.h>

#include <numeric>

#include "data/loading/blend.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

TEST(DataBlend, ParsesDirectoriesAndWeights) {
  const std::vector<BlendEntry> entries = parse_blend(" data/web:0.7 , /abs/c:o:de:0.3,x:2");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].path, "data/web");
  EXPECT_EQ(entries[0].weight, 0.7);
  EXPECT_EQ(entries[1].path, "/abs/c:o:de");  // the weight follows the last ':'
  EXPECT_EQ(entries[1].weight, 0.3);
  EXPECT_EQ(entries[2].weight, 2.0);
}

TEST(DataBlend, BadSpecsAreUserErrors) {
  test::expect_user_error([] { parse_blend("a:0.5,b"); }, {"\"b\"", "no ':WEIGHT'"});
  test::expect_user_error([] { parse_blend("a:heavy"); }, {"a:heavy", "not a number"});
  test::expect_user_error([] { parse_blend("a:0"); }, {"not positive"});
  test::expect_user_error([] { parse_blend("a:-1"); }, {"not positive"});
  test::expect_user_error([] { parse_blend(":1"); }, {"no dataset directory"});
  test::expect_user_error([] { parse_blend("a:1,"); }, {"no ':WEIGHT'"});
}

TEST(DataBlend, QuotasFollowTheWeights) {
  const BlendSchedule schedule({2.0, 1.0, 1.0});
  EXPECT_EQ(schedule.period(), kBlendPeriod);
  EXPECT_EQ(schedule.quota(0), 5000u);
  EXPECT_EQ(schedule.quota(1), 2500u);
  EXPECT_EQ(schedule.quota(2), 2500u);
  // Thirds do not divide 10000: largest remainders give the extra sample to the first.
  const BlendSchedule thirds({1.0, 1.0, 1.0});
  EXPECT_EQ(thirds.quota(0) + thirds.quota(1) + thirds.quota(2), kBlendPeriod);
  EXPECT_EQ(thirds.quota(0), 3334u);
  EXPECT_EQ(thirds.quota(1), 3333u);
}

TEST(DataBlend, EveryPrefixIsCloseToTheWeightsAndIndicesCountUp) {
  const std::vector<double> weights = {0.5, 0.3, 0.15, 0.05};
  const BlendSchedule schedule(weights);
  std::vector<std::uint64_t> taken(weights.size(), 0);
  for (std::uint64_t g = 0; g < 3 * kBlendPeriod; ++g) {
    const BlendSchedule::Pick pick = schedule.pick(g);
    ASSERT_EQ(pick.index, taken[pick.source]) << "position " << g;
    ++taken[pick.source];
    for (std::size_t d = 0; d < weights.size(); ++d)
      ASSERT_LE(std::abs(static_cast<double>(taken[d]) - weights[d] * static_cast<double>(g + 1)), 1.0)
          << "source " << d << " after " << g + 1;
  }
}

TEST(DataBlend, OneSourceTakesEveryPosition) {
  const BlendSchedule schedule({3.0});
  for (std::uint64_t g : {0u, 1u, 99999u}) {
    EXPECT_EQ(schedule.pick(g).source, 0u);
    EXPECT_EQ(schedule.pick(g).index, g);
  }
}

TEST(DataBlend, AWeightBelowTheResolutionIsAUserError) {
  test::expect_user_error([] { BlendSchedule({1.0, 1e-6}); }, {"1e-06", "resolution of 1/10000"});
}

}  // namespace
}  // namespace ustrain
