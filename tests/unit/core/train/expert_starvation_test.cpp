#include <gtest/gtest.h>

#include <vector>

#include "core/monitor/expert_starvation.h"

namespace ustrain {
namespace {

TEST(ExpertStarvation, NamesALayerOnceTheSameExpertsStayIdleForPatienceSteps) {
  ExpertStarvationWatch watch(3);
  StarvingLayer s;
  const std::vector<float> collapsed{0, 0, 4096, 0}, balanced{1, 2, 3, 4};
  EXPECT_FALSE(watch.add_step(1, collapsed, s));
  EXPECT_FALSE(watch.add_step(1, collapsed, s));
  ASSERT_TRUE(watch.add_step(1, collapsed, s));
  EXPECT_EQ(s.layer, 1);
  EXPECT_EQ(s.starving, 3);
  EXPECT_EQ(s.experts, 4);
  EXPECT_FALSE(watch.add_step(1, collapsed, s)) << "once per streak";
  EXPECT_FALSE(watch.add_step(1, balanced, s));
  EXPECT_FALSE(watch.add_step(1, collapsed, s));
  EXPECT_FALSE(watch.add_step(1, collapsed, s));
  EXPECT_TRUE(watch.add_step(1, collapsed, s)) << "a new streak after recovery warns again";
}

TEST(ExpertStarvation, CountsOnlyExpertsIdleThroughTheWholeStreak) {
  ExpertStarvationWatch watch(2);
  StarvingLayer s;
  EXPECT_FALSE(watch.add_step(0, std::vector<float>{0, 0, 5, 5}, s));
  ASSERT_TRUE(watch.add_step(0, std::vector<float>{0, 3, 0, 5}, s));
  EXPECT_EQ(s.starving, 1);  // expert 0 alone was idle in both steps
}

TEST(ExpertStarvation, DifferentIdleExpertsEachStepAreNoStreak) {
  ExpertStarvationWatch watch(2);
  StarvingLayer s;
  EXPECT_FALSE(watch.add_step(0, std::vector<float>{0, 1, 1, 1}, s));
  EXPECT_FALSE(watch.add_step(0, std::vector<float>{1, 0, 1, 1}, s));
  EXPECT_TRUE(watch.add_step(0, std::vector<float>{1, 0, 1, 1}, s)) << "expert 1's streak began a step later";
}

TEST(ExpertStarvation, LayersAreWatchedApart) {
  ExpertStarvationWatch watch(2);
  StarvingLayer s;
  EXPECT_FALSE(watch.add_step(1, std::vector<float>{0, 8}, s));
  EXPECT_FALSE(watch.add_step(2, std::vector<float>{4, 4}, s));
  EXPECT_TRUE(watch.add_step(1, std::vector<float>{0, 8}, s));
  EXPECT_EQ(s.layer, 1);
}

}  // namespace
}  // namespace ustrain
