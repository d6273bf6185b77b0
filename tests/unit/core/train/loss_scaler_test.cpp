// Dynamic loss scaling (core/step/loss_scaler.h): skip and halve on overflow, double after a run
// of clean steps, give up at the smallest scale.
#include <gtest/gtest.h>

#include <limits>

#include "core/step/loss_scaler.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

TEST(LossScaler, DisabledKeepsScaleOneAndAppliesEveryStep) {
  LossScaler s(false);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_TRUE(s.update(false, 1));
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.skipped_steps(), 0);
}

TEST(LossScaler, OverflowSkipsTheStepAndHalvesTheScale) {
  LossScaler s(true, 1024.0, 3);
  EXPECT_FALSE(s.update(false, 1));
  EXPECT_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_TRUE(s.update(true, 2));
  EXPECT_EQ(s.scale(), 512.0);
}

TEST(LossScaler, GrowsAfterTheIntervalOfCleanStepsCountedFromTheLastOverflow) {
  LossScaler s(true, 8.0, 3);
  EXPECT_TRUE(s.update(true, 1));
  EXPECT_TRUE(s.update(true, 2));
  EXPECT_FALSE(s.update(false, 3));  // resets the run of clean steps
  EXPECT_EQ(s.scale(), 4.0);
  EXPECT_TRUE(s.update(true, 4));
  EXPECT_TRUE(s.update(true, 5));
  EXPECT_EQ(s.scale(), 4.0);
  EXPECT_TRUE(s.update(true, 6));
  EXPECT_EQ(s.scale(), 8.0);
}

TEST(LossScaler, OverflowAtTheSmallestScaleIsAUserErrorNamingTheFix) {
  LossScaler s(true, 2.0, 100);
  EXPECT_FALSE(s.update(false, 1));
  EXPECT_EQ(s.scale(), 1.0);
  try {
    s.update(false, 2);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision = \"bf16\""), std::string::npos) << e.what();
  }
}

// Gradients that are all zero never overflow: the scale stops growing at kMaxScale instead of
// reaching infinity, which would halve to itself and skip every step after.
TEST(LossScaler, GrowthStopsAtTheLargestScale) {
  LossScaler s(true, LossScaler::kMaxScale / 2, 1);
  EXPECT_TRUE(s.update(true, 1));
  EXPECT_EQ(s.scale(), LossScaler::kMaxScale);
  for (std::int64_t step = 2; step < 2000; ++step) EXPECT_TRUE(s.update(true, step));
  EXPECT_EQ(s.scale(), LossScaler::kMaxScale);
}

TEST(LossScaler, ACheckpointsInfiniteScaleIsRefused) {
  LossScaler s(true);
  EXPECT_THROW(s.restore(std::numeric_limits<double>::infinity()), UserError);
}

}  // namespace
}  // namespace ustrain
