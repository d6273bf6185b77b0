// Learning-rate schedules (core/step/lr_schedule.h): warmup, cosine, linear, constant, wsd.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include "core/step/lr_schedule.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

LrScheduleConfig schedule(const std::string& decay, std::int64_t warmup, std::int64_t total) {
  LrScheduleConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = warmup;
  c.total_steps = total;
  c.decay = decay;
  return c;
}

TEST(LrSchedule, WarmupIsLinearFromZero) {
  for (const char* decay : {"cosine", "linear", "constant", "wsd"}) {
    const auto c = schedule(decay, 10, 110);
    EXPECT_DOUBLE_EQ(lr_at(c, 1), 0.1) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 5), 0.5) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 10), 1.0) << decay;
  }
}

TEST(LrSchedule, CosineEndpointsAndMidpoint) {
  const auto c = schedule("cosine", 10, 110);
  EXPECT_DOUBLE_EQ(lr_at(c, 60), 0.55);  // t = 0.5: halfway between lr and min_lr
  // t = 0.25: min + (lr - min) * 0.5 * (1 + cos(pi / 4))
  EXPECT_DOUBLE_EQ(lr_at(c, 35), 0.1 + 0.9 * 0.5 * (1 + std::numbers::sqrt2 / 2));
  EXPECT_DOUBLE_EQ(lr_at(c, 110), 0.1);
}

TEST(LrSchedule, LinearEndpointsAndMidpoint) {
  const auto c = schedule("linear", 10, 110);
  EXPECT_DOUBLE_EQ(lr_at(c, 60), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 35), 1.0 - 0.9 * 0.25);
  EXPECT_DOUBLE_EQ(lr_at(c, 110), 0.1);
}

TEST(LrSchedule, ConstantHoldsTheLearningRate) {
  const auto c = schedule("constant", 10, 110);
  EXPECT_DOUBLE_EQ(lr_at(c, 11), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 60), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 110), 1.0);
}

TEST(LrSchedule, WsdIsStableThenDecaysOverTheLastFraction) {
  auto c = schedule("wsd", 10, 100);
  c.wsd_decay_fraction = 0.2;  // decay over steps 80..100
  EXPECT_DOUBLE_EQ(lr_at(c, 11), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 50), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 80), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 90), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 95), 0.325);
  EXPECT_DOUBLE_EQ(lr_at(c, 100), 0.1);
}

TEST(LrSchedule, WsdDecayNeverStartsBeforeWarmupEnds) {
  auto c = schedule("wsd", 8, 10);
  c.wsd_decay_fraction = 0.5;  // would start at step 5; warmup runs to 8
  EXPECT_DOUBLE_EQ(lr_at(c, 8), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 9), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 10), 0.1);
}

TEST(LrSchedule, NoWarmupStartsNearTheFullRate) {
  const auto c = schedule("cosine", 0, 100);
  EXPECT_DOUBLE_EQ(lr_at(c, 1), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.01)));
  EXPECT_DOUBLE_EQ(lr_at(c, 50), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 100), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("linear", 0, 100), 1), 1.0 - 0.9 * 0.01);
}

TEST(LrSchedule, WarmupCoveringTheWholeRunEndsAtTheFullRate) {
  for (const char* decay : {"cosine", "linear", "constant", "wsd"}) {
    const auto c = schedule(decay, 20, 20);
    EXPECT_DOUBLE_EQ(lr_at(c, 1), 0.05) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 10), 0.5) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 20), 1.0) << decay;
  }
}

TEST(LrSchedule, SingleStepRunWithoutWarmupUsesTheFinalValue) {
  EXPECT_DOUBLE_EQ(lr_at(schedule("cosine", 0, 1), 1), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("constant", 0, 1), 1), 1.0);
}

TEST(LrSchedule, StepsPastTheEndKeepTheFinalValue) {
  EXPECT_DOUBLE_EQ(lr_at(schedule("cosine", 10, 110), 500), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("wsd", 10, 110), 500), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("constant", 10, 110), 500), 1.0);
}

TEST(LrSchedule, RisesThroughWarmupThenNeverRises) {
  for (const char* decay : {"cosine", "linear", "constant", "wsd"}) {
    const auto c = schedule(decay, 7, 53);
    double previous = 0;
    for (std::int64_t step = 1; step <= c.total_steps; ++step) {
      const double lr = lr_at(c, step);
      if (step <= c.warmup_steps) {
        EXPECT_GT(lr, previous) << decay << " step " << step;
      } else {
        EXPECT_LE(lr, previous) << decay << " step " << step;
      }
      EXPECT_GE(lr, c.min_lr) << decay << " step " << step;
      EXPECT_LE(lr, c.lr) << decay << " step " << step;
      previous = lr;
    }
  }
}

TEST(LrSchedule, RejectsUnknownDecayAndBadRanges) {
  EXPECT_THROW(lr_at(schedule("exponential", 0, 10), 1), UserError);
  EXPECT_THROW(lr_at(schedule("cosine", -1, 10), 1), UserError);
  EXPECT_THROW(lr_at(schedule("cosine", 0, 0), 1), UserError);
  auto c = schedule("wsd", 0, 10);
  c.wsd_decay_fraction = 1.5;
  EXPECT_THROW(lr_at(c, 1), UserError);
}

}  // namespace
}  // namespace ustrain
