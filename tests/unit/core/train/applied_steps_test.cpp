// A run that took steps and applied none of them ends with an error saying what skipped them
// and what to change (core/monitor/applied_steps.h); a run that applied any, or took none, does not.
#include <gtest/gtest.h>

#include <string>

#include "core/monitor/applied_steps.h"

namespace ustrain {
namespace {

TEST(AppliedSteps, OneAppliedStepOrNoneTakenIsNoError) {
  EXPECT_FALSE(no_step_applied({.first = 1, .last = 40, .applied = 1, .overflowed = 39}));
  EXPECT_FALSE(no_step_applied({.first = 41, .last = 40}));  // a resumed run that was complete
}

TEST(AppliedSteps, EveryStepOverflowedNamesTheLossScale) {
  const auto m = no_step_applied({.first = 1, .last = 5, .overflowed = 5, .scale_at_start = 4294967296,
                                  .scale_now = 134217728});
  ASSERT_TRUE(m);
  for (const char* part : {"none of the 5 steps this run took (steps 1-5) was applied",
                           "overflowed at 5 of them, the loss scale falling from 4294967296 to 134217728",
                           "lower train.loss_scale_init (134217728 or less", "--overwrite"})
    EXPECT_NE(m->find(part), std::string::npos) << part << " not in: " << *m;
}

TEST(AppliedSteps, AResumedRunsScaleComesFromItsCheckpoint) {
  const auto m = no_step_applied({.first = 31, .last = 40, .overflowed = 10, .scale_at_start = 65536,
                                  .scale_now = 64, .resumed = true});
  ASSERT_TRUE(m);
  EXPECT_NE(m->find("(steps 31-40)"), std::string::npos) << *m;
  EXPECT_NE(m->find("comes from the checkpoint"), std::string::npos) << *m;
  EXPECT_EQ(m->find("loss_scale_init"), std::string::npos) << *m;  // ignored on a resume
}

TEST(AppliedSteps, NonFiniteStepsNameTheLearningRate) {
  const auto m = no_step_applied({.first = 1, .last = 3, .nonfinite = 3});
  ASSERT_TRUE(m);
  EXPECT_NE(m->find("3 had a non-finite loss or gradient norm"), std::string::npos) << *m;
  EXPECT_NE(m->find("optim.lr"), std::string::npos) << *m;
  EXPECT_EQ(m->find("loss scale"), std::string::npos) << *m;
}

}  // namespace
}  // namespace ustrain
