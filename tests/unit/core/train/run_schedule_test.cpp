// The schedule a run follows: a warm-up longer than the run is cut to it, and a resume with
// another train.steps says how the learning rate moves.
#include "core/step/run_schedule.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

Recipe parse(const std::vector<std::string>& overrides) {
  return parse_recipe("[data]\npath = \"d\"\n[optim]\nlr = 1e-3\n", "r.toml", overrides);
}

TEST(RunSchedule, AWarmupLongerThanTheRunIsCutToIt) {
  const Recipe r = parse({"train.steps=4", "schedule.warmup_steps=100"});
  const LrScheduleConfig s = schedule_of(r);
  EXPECT_EQ(s.warmup_steps, 4);
  EXPECT_EQ(s.total_steps, 4);
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 2.5e-4);
  EXPECT_DOUBLE_EQ(lr_at(s, 4), 1e-3);  // the peak at the last step
  const std::optional<std::string> note = shortened_warmup_note(r);
  ASSERT_TRUE(note.has_value());
  expect_mentions(*note, {"schedule.warmup_steps = 100", "train.steps = 4", "over all 4 steps"});
  EXPECT_FALSE(shortened_warmup_note(parse({"train.steps=4", "schedule.warmup_steps=4"})).has_value());
  EXPECT_EQ(schedule_of(parse({"train.steps=40", "schedule.warmup_steps=4"})).warmup_steps, 4);
}

TEST(RunSchedule, ALongerRunStretchesTheScheduleAndTheRateGoesBackUp) {
  const Recipe saved = parse({"train.steps=100", "schedule.warmup_steps=10", "schedule.min_lr=1e-4"});
  const Recipe longer = parse({"train.steps=200", "schedule.warmup_steps=10", "schedule.min_lr=1e-4"});
  const std::optional<std::string> note = stretched_schedule_note(to_toml(saved), longer, 100);
  ASSERT_TRUE(note.has_value());
  const double before = lr_at(schedule_of(saved), 100), after = lr_at(schedule_of(longer), 101);
  EXPECT_DOUBLE_EQ(before, 1e-4);
  EXPECT_GT(after, 5e-4);
  expect_mentions(*note, {"train.steps is 200", "planned 100", "stretched to end at step 200 instead of 100",
                          "goes back up from 1.000e-04 at step 100", fmt::format("to {:.3e} at step 101", after),
                          "decays (cosine) to schedule.min_lr = 0.0001 by step 200"});
}

TEST(RunSchedule, AShorterRunSqueezesIt) {
  const Recipe saved = parse({"train.steps=200", "schedule.decay=linear"});
  const Recipe shorter = parse({"train.steps=120", "schedule.decay=linear"});
  const std::optional<std::string> note = stretched_schedule_note(to_toml(saved), shorter, 100);
  ASSERT_TRUE(note.has_value());
  expect_mentions(*note, {"squeezed to end at step 120 instead of 200", "drops from 5.000e-04 at step 100"});
}

TEST(RunSchedule, NothingToSayWhenNothingMoves) {
  const Recipe r = parse({"train.steps=100"});
  EXPECT_FALSE(stretched_schedule_note(to_toml(r), r, 50).has_value());                             // same end
  EXPECT_FALSE(stretched_schedule_note(to_toml(r), parse({"train.steps=100"}), 100).has_value());  // no step left
  EXPECT_FALSE(stretched_schedule_note("not a recipe [", parse({"train.steps=300"}), 50).has_value());
  const std::optional<std::string> constant =
      stretched_schedule_note(to_toml(parse({"train.steps=100", "schedule.decay=constant"})),
                              parse({"train.steps=300", "schedule.decay=constant"}), 100);
  ASSERT_TRUE(constant.has_value());
  expect_mentions(*constant, {"stays 1.000e-03 at step 101"});
  EXPECT_EQ(constant->find("decays"), std::string::npos) << *constant;
}

}  // namespace
}  // namespace ustrain
