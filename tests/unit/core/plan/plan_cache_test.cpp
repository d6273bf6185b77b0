// The planner shares what layouts have in common: each rank's recorded step (priced action by
// action as it is recorded, by its key), the pipeline programs (by schedule, pp, virtual stages
// and micro-batch counts) and each rank's memory plan (made once without its op scratch, the
// scratch line added per layout). Shared or not, the answers are the same: for a spread of
// layouts the plan's figures equal, exactly, those planned for that layout alone from scratch
// (the trainer's own memory plan of each rank with the scratch of its own recorded step, and
// a step time model that has recorded nothing else).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <set>
#include <string>

#include "core/distributed/pipeline_plan.h"
#include "core/plan/planner.h"
#include "core/plan/step_scratch.h"
#include "core/plan/rank_memory.h"

namespace ustrain {
namespace {

Recipe small_model(int experts) {
  std::string moe;
  if (experts > 0)
    moe = fmt::format("n_experts = {}\nexperts_per_token = 2\nexpert_ffn_hidden = 128\nrouter_score = \"softmax\"\n",
                      experts);
  return parse_recipe(fmt::format(R"(
[model]
vocab_size = 1000
d_model = 128
n_layers = 4
n_heads = 8
n_kv_heads = 4
ffn_hidden = 256
max_seq_len = 256
{}
[data]
path = "unused"
tokenizer = "external"
[train]
micro_batch = 1
global_batch = 16
seq_len = 256
precision = "bf16"
eval_interval = 0
)",
                                  moe),
                      "test recipe");
}

std::string key_of(const Layout& l) { return fmt::format("{}", fmt::join(l.overrides(), " ")); }

// Every `stride`-th fitting layout, with the first of each pp and zero stage.
void expect_shared_equals_alone(const Recipe& given, int devices, int stride) {
  PlanOptions o;
  o.devices = devices;
  o.gpu = "h100";
  const Plan plan = plan_layouts(given, o);
  std::map<std::string, const PlannedLayout*> planned;
  for (const PlannedLayout& p : plan.layouts) planned[key_of(p.layout)] = &p;
  SearchSpace space{devices, 8, plan.global_batch, false};
  const LayoutSearch search = enumerate_layouts(recipe_for_device(given, o, 0), space);
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  int compared = 0, fitting = 0;
  for (const Candidate& c : search.candidates) {
    const PlannedLayout& p = *planned.at(key_of(c.layout));
    if (!p.memory.fits) continue;
    const bool first_of_kind = seen.insert({c.layout.pp, c.layout.zero}).second;
    if (fitting++ % stride != 0 && !first_of_kind) continue;
    SCOPED_TRACE(key_of(c.layout));
    const Recipe recipe = c.recipe();
    for (int r = 0; r < static_cast<int>(c.layout.pp); ++r) {
      const RankMemory alone =
          plan_rank_memory(recipe, r, plan_pipeline(recipe, r), deviceless_op_scratch(recipe, r));
      EXPECT_EQ(p.memory.rank_bytes.at(static_cast<std::size_t>(r)), alone.plan.total_bytes()) << "pp rank " << r;
    }
    StepTimeModel fresh(plan.hardware, plan.calibration, std::min(devices, 8), Device::cuda, std::min(devices, 8));
    EXPECT_EQ(p.time.step_s, fresh.predict(recipe).step_s);
    ++compared;
  }
  EXPECT_GE(compared, 20);
}

TEST(PlanCache, SharedAnswersEqualEachLayoutPlannedAlone) { expect_shared_equals_alone(small_model(0), 8, 7); }

TEST(PlanCache, SharedAnswersEqualEachLayoutPlannedAloneWithExperts) {
  expect_shared_equals_alone(small_model(4), 4, 5);
}

}  // namespace
}  // namespace ustrain
