// A recipe with several mistakes reports them all at once, each as it would be reported alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/recipe/recipe.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_recipe(text, "test.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError for:\n" << text;
  return "";
}

TEST(RecipeErrors, EveryMistakeIsReportedTogether) {
  const std::string text =
      "[data]\npath = \"shards\"\n"
      "[model]\nd_modle = 64\nn_layers = \"two\"\n"
      "[train]\nsteps = 0\n"
      "[optim]\nlr = 1e-4\n"
      "[schedule]\nmin_lr = 1e-3\n"
      "[tracing]\non = true\n";
  const std::string message = error_of(text, {"log.level=loud"});
  EXPECT_EQ(message,
            "test.toml has 6 problems:\n"
            "  test.toml:4: unknown key model.d_modle; did you mean model.d_model?\n"
            "  test.toml:5: model.n_layers: expected integer, found string \"two\"; write it like model.n_layers = 4\n"
            "  test.toml:7: train.steps = 0 is not allowed: it must be >= 1\n"
            "  test.toml:12: unknown section [tracing]; did you mean [train]?\n"
            "  --set log.level=loud: log.level = \"loud\" is not allowed: it must be one of: trace, debug, info, warn, "
            "error\n"
            "  test.toml:11: schedule.min_lr = 0.001 exceeds optim.lr = 0.0001; the schedule decays from optim.lr "
            "down to min_lr, so set min_lr <= lr");
}

TEST(RecipeErrors, OneMistakeReadsAsBefore) {
  EXPECT_EQ(error_of("[data]\npath = \"shards\"\n[train]\nsteps = 0\n"),
            "test.toml:4: train.steps = 0 is not allowed: it must be >= 1");
}

// A refused value leaves the default in its place; rules about that key would judge the
// default, so they wait for the fix.
TEST(RecipeErrors, RulesAboutARefusedKeyAreLeftOut) {
  const std::string message = error_of("[data]\npath = \"shards\"\n[model]\nd_model = 100\nn_heads = \"eight\"\n");
  EXPECT_EQ(message.find("divisible"), std::string::npos) << message;
  EXPECT_NE(message.find("test.toml:5: model.n_heads: expected integer"), std::string::npos) << message;
}

// Schedules count micro-batches in an int; a count past it once wrapped into "a pipeline needs at
// least one micro-batch".
TEST(RecipeErrors, AGlobalBatchOfMoreMicroBatchesThanAStepHoldsIsNamed) {
  const std::string message = error_of("[data]\npath = \"shards\"\n[train]\nmicro_batch = 8\n"
                                       "global_batch = 9223372036854775800\n");
  EXPECT_NE(message.find("test.toml:5: train.global_batch = 9223372036854775800 makes 1152921504606846975 "
                         "micro-batches per step"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("lower global_batch or raise micro_batch"), std::string::npos) << message;
}

}  // namespace
}  // namespace ustrain
