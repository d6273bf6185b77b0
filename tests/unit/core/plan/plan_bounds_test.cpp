// A model whose GEMMs outweigh its other ops, as at scale, so that the bounds are close to the
// step. Asked for the N fastest layouts, the planner leaves out those whose step time cannot beat
// the Nth fastest found so far, by two lower bounds of the predicted step. Both must hold for
// every layout (busy <= step bound <= predicted step), and the plan's N fastest must be the
// ones, with the same figures, that planning every layout finds.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "core/plan/planner.h"
#include "core/step/model_instance.h"

namespace ustrain {
namespace {

Recipe small_model(int experts, const std::string& parallel_keys = "", int first_dense_layers = 0) {
  std::string moe;
  if (experts > 0)
    moe = fmt::format("n_experts = {}\nexperts_per_token = 2\nexpert_ffn_hidden = 4096\nrouter_score = \"softmax\"\n"
                      "first_dense_layers = {}\n",
                      experts, first_dense_layers);
  return parse_recipe(fmt::format(R"(
[model]
vocab_size = 32000
d_model = 2048
n_layers = 4
n_heads = 16
n_kv_heads = 4
ffn_hidden = 8192
max_seq_len = 4096
{}
[data]
path = "unused"
tokenizer = "external"
[train]
micro_batch = 1
global_batch = 32
seq_len = 4096
precision = "bf16"
eval_interval = 0
[parallel]
{}
)",
                                  moe, parallel_keys),
                      "test recipe");
}

std::string key_of(const Layout& l) { return fmt::format("{}", fmt::join(l.overrides(), " ")); }

void expect_bounds_hold(const Recipe& given, int devices) {
  PlanOptions o;
  o.devices = devices;
  o.gpu = "h100";
  const Hardware hw = gpu_hardware("h100");
  const Recipe base = recipe_for_device(given, o, 0);
  const LayoutSearch search =
      enumerate_layouts(base, SearchSpace{devices, 8, given.train.global_batch, false, {}, {}, {}});
  ASSERT_GT(search.candidates.size(), 20u);
  StepTimeModel model(hw, default_gpu_calibration(hw, compute_dtype(base)), std::min(devices, 8), Device::cuda,
                      std::min(devices, 8));
  for (const Candidate& c : search.candidates) {
    SCOPED_TRACE(key_of(c.layout));
    const Recipe recipe = c.recipe();
    const PipelineProgram program = make_pipeline_program(
        parse_pipeline_schedule(recipe.parallel.pp_schedule),
        pipeline_shape(recipe, static_cast<int>(recipe.grad_accum_steps())));
    const double busy = model.busy_lower_bound(recipe);
    const double step = model.step_lower_bound(recipe, program);
    const double predicted = model.predict(recipe, program).step_s;
    EXPECT_GT(busy, 0);
    EXPECT_LE(busy, step * (1 + 1e-12));
    EXPECT_LE(step, predicted * (1 + 1e-12));
  }
}

TEST(PlanBounds, HoldForEveryDenseLayout) { expect_bounds_hold(small_model(0), 8); }

TEST(PlanBounds, HoldForEveryMixtureOfExpertsLayout) { expect_bounds_hold(small_model(4), 4); }

// A layer's bound is the least of the dense and the expert layers' where the model mixes them.
TEST(PlanBounds, HoldForMixedDenseAndExpertLayers) { expect_bounds_hold(small_model(4, "", 1), 4); }

TEST(PlanBounds, HoldWithoutOverlappedCommunication) {
  expect_bounds_hold(small_model(0, "overlap_comm = false"), 8);
}

void expect_fastest_as_planned_alone(const Recipe& given, int devices, std::size_t n) {
  PlanOptions every;
  every.devices = devices;
  every.gpu = "h100";
  PlanOptions fastest = every;
  fastest.fastest = n;
  const Plan all = plan_layouts(given, every);
  const Plan few = plan_layouts(given, fastest);
  ASSERT_EQ(all.layouts.size(), few.layouts.size());
  std::size_t outranked = 0;
  for (const PlannedLayout& p : few.layouts) outranked += p.outranked ? 1 : 0;
  EXPECT_GT(outranked, 0u) << "the bounds left nothing out";
  for (std::size_t i = 0; i < n; ++i) {
    const PlannedLayout& a = all.layouts[i];
    const PlannedLayout& b = few.layouts[i];
    ASSERT_TRUE(a.memory.fits);
    EXPECT_EQ(key_of(a.layout), key_of(b.layout)) << "rank " << i + 1;
    EXPECT_EQ(a.time.step_s, b.time.step_s);
    EXPECT_EQ(a.memory.bytes, b.memory.bytes);
    EXPECT_EQ(a.limits, b.limits);
  }
  // The same layouts are left out whatever the number of threads.
  fastest.threads = 1;
  const Plan one = plan_layouts(given, fastest);
  ASSERT_EQ(one.layouts.size(), few.layouts.size());
  for (std::size_t i = 0; i < one.layouts.size(); ++i) {
    EXPECT_EQ(key_of(one.layouts[i].layout), key_of(few.layouts[i].layout));
    EXPECT_EQ(one.layouts[i].outranked, few.layouts[i].outranked);
  }
}

TEST(PlanBounds, FastestAreThoseOfTheWholePlan) {
  expect_fastest_as_planned_alone(small_model(0), 8, 3);
  expect_fastest_as_planned_alone(small_model(4), 8, 5);
  expect_fastest_as_planned_alone(small_model(0), 16, 1);
}

}  // namespace
}  // namespace ustrain
