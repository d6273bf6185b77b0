// Steps with a non-finite loss or gradient norm: which are bad, how they are counted, when
// training stops, and the test hook that poisons chosen steps.
#include "core/monitor/nonfinite_steps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "kernels/error.h"

namespace ustrain {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

TEST(NonfiniteSteps, ANonFiniteLossOrGradientIsBad) {
  EXPECT_FALSE(NonfiniteSteps::bad(2.5, 4.0, false));
  EXPECT_TRUE(NonfiniteSteps::bad(kNaN, 4.0, false));
  EXPECT_TRUE(NonfiniteSteps::bad(kInf, 4.0, false));
  EXPECT_TRUE(NonfiniteSteps::bad(2.5, kNaN, false));
  EXPECT_TRUE(NonfiniteSteps::bad(2.5, kInf, false));
  // Under fp16 loss scaling an overflowing gradient is the scaler's to handle; a bad loss is not.
  EXPECT_FALSE(NonfiniteSteps::bad(2.5, kInf, true));
  EXPECT_TRUE(NonfiniteSteps::bad(kNaN, 4.0, true));
}

TEST(NonfiniteSteps, AGoodStepEndsTheStreak) {
  NonfiniteSteps steps(3, nullptr);
  steps.count(1, false, 2.0, 1.0);
  steps.count(2, true, kNaN, kNaN);
  steps.count(3, true, kNaN, kNaN);
  EXPECT_EQ(steps.in_a_row(), 2);
  EXPECT_NO_THROW(steps.stop_if_too_many(3, ""));
  steps.count(4, false, 2.0, 1.0);
  EXPECT_EQ(steps.in_a_row(), 0);
  EXPECT_EQ(steps.total(), 2);
  steps.count(5, true, kInf, 1.0);
  steps.count(6, true, kInf, 1.0);
  EXPECT_NO_THROW(steps.stop_if_too_many(6, ""));
  EXPECT_EQ(steps.total(), 4);
}

TEST(NonfiniteSteps, MaxBadStepsInARowStopTrainingWithAClearError) {
  NonfiniteSteps steps(2, nullptr);
  steps.count(7, true, kNaN, kNaN);
  EXPECT_NO_THROW(steps.stop_if_too_many(7, ""));
  steps.count(8, true, kInf, 3.5);
  try {
    steps.stop_if_too_many(8, "runs/x/checkpoints/step-00000006");
    ADD_FAILURE() << "two bad steps in a row did not stop training";
  } catch (const UserError& e) {
    const std::string m = e.what();
    for (const char* part : {"stopped at step 8", "last 2 steps", "loss inf", "gradient norm 3.5",
                             "train.max_bad_steps = 2", "newest checkpoint holds the last good state",
                             "runs/x/checkpoints/step-00000006", "optim.lr", "--resume auto"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  }
}

// A run without a checkpoint has no last good state to go back to: the message does not
// promise one, and says to start again instead of resuming.
TEST(NonfiniteSteps, WithoutACheckpointTheErrorSaysThereIsNone) {
  NonfiniteSteps steps(1, nullptr);
  steps.count(3, true, kNaN, kNaN);
  try {
    steps.stop_if_too_many(3, "");
    ADD_FAILURE() << "a bad step did not stop training";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find("newest checkpoint"), std::string::npos) << m;
    EXPECT_EQ(m.find("--resume auto"), std::string::npos) << m;
    EXPECT_NE(m.find("no checkpoint to go back to"), std::string::npos) << m;
    EXPECT_NE(m.find("--overwrite"), std::string::npos) << m;
  }
}

TEST(NonfiniteSteps, TheTestHookPoisonsTheNamedSteps) {
  const NonfiniteSteps none(5, nullptr);
  EXPECT_EQ(none.loss(3, 1.5), 1.5);
  const NonfiniteSteps hook(5, "3,5-7");
  EXPECT_EQ(hook.loss(2, 1.5), 1.5);
  EXPECT_TRUE(std::isnan(hook.loss(3, 1.5)));
  EXPECT_EQ(hook.loss(4, 1.5), 1.5);
  for (int s : {5, 6, 7}) EXPECT_TRUE(std::isnan(hook.loss(s, 1.5))) << s;
  EXPECT_EQ(hook.loss(8, 1.5), 1.5);
  for (const char* bad : {"x", "3,", "0", "5-", "-2"}) EXPECT_THROW(NonfiniteSteps(5, bad), UserError) << bad;
}

}  // namespace
}  // namespace ustrain
