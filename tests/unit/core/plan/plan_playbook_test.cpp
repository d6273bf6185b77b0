// The Ultra-Scale Playbook's findings about layouts, as the planner reproduces them on the GPU
// descriptions (core/plan/hardware.h): tensor parallelism stays within a node even where it
// may cross one; a ~1B model on one 8-GPU node trains fastest with data parallelism and ZeRO-1
// (or ZeRO-3, as fast in bf16), not tensor parallelism; an 80B model does not fit one node without pp or tp; recompute is
// chosen only where memory requires it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "core/plan/planner.h"
#include "core/recipe/recipe.h"

namespace ustrain {
namespace {

// A Llama-style model of d_model d, with `layers` layers, `heads` heads (`kv` of keys and
// values) and an MLP of `ffn`, trained in bf16 on sequences of `seq`.
Recipe model(int d, int layers, int heads, int kv, int ffn, int seq, int global_batch) {
  return parse_recipe(fmt::format(R"(
[model]
vocab_size = 32000
d_model = {}
n_layers = {}
n_heads = {}
n_kv_heads = {}
ffn_hidden = {}
max_seq_len = {}
[data]
path = "unused"
tokenizer = "external"
[train]
micro_batch = 1
global_batch = {}
seq_len = {}
precision = "bf16"
eval_interval = 0
[device]
type = "cuda"
)",
                                  d, layers, heads, kv, ffn, seq, global_batch, seq),
                      "test recipe");
}

PlanOptions on(const std::string& gpu, int devices, std::int64_t tokens = 0) {
  PlanOptions o;
  o.devices = devices;
  o.gpu = gpu;
  o.global_batch_tokens = tokens;
  return o;
}

const PlannedLayout& best(const Plan& plan) {
  EXPECT_TRUE(plan.layouts.front().memory.fits);
  return plan.layouts.front();
}

TEST(PlanPlaybook, TensorParallelismStaysWithinANodeWhenItMayCross) {
  // A 7B-like model whose heads split 16 ways, on two nodes, tp allowed across them.
  const Recipe recipe = model(4096, 32, 32, 16, 11008, 4096, 256);
  PlanOptions o = on("h100", 16);
  o.model_parallel_across_nodes = true;
  const Plan plan = plan_layouts(recipe, o);
  const bool offered = std::any_of(plan.layouts.begin(), plan.layouts.end(),
                                   [](const PlannedLayout& p) { return p.layout.tp == 16 && p.memory.fits; });
  EXPECT_TRUE(offered) << "tp = 16 across the two nodes was searched and fits";
  EXPECT_LE(best(plan).layout.tp, 8) << best(plan).layout.str();
}

TEST(PlanPlaybook, OneBillionOnOneNodeIsDataParallelWithZeroOne) {
  const Recipe recipe = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/bench-1b.toml");
  const Plan plan = plan_layouts(recipe, on("h100", 8, 1 << 20));  // the Playbook's 1M-token batches
  const PlannedLayout& b = best(plan);
  EXPECT_EQ(b.layout.dp, 8) << b.layout.str();
  // ZeRO-1 is the Playbook's answer; in bf16 ZeRO-3's 16-bit gathers, prefetched behind the
  // compute, tie with it (ZeRO-1's all-gather after the update is exposed): within 0.5%.
  const auto zero1 = std::find_if(plan.layouts.begin(), plan.layouts.end(), [](const PlannedLayout& p) {
    return p.layout.dp == 8 && p.layout.zero == 1 && p.memory.fits;
  });
  ASSERT_NE(zero1, plan.layouts.end());
  EXPECT_GE(zero1->tokens_per_s, 0.995 * b.tokens_per_s) << zero1->layout.str() << " against " << b.layout.str();
  const auto tp = std::find_if(plan.layouts.begin(), plan.layouts.end(),
                               [](const PlannedLayout& p) { return p.layout.tp > 1 && p.memory.fits; });
  ASSERT_NE(tp, plan.layouts.end());
  EXPECT_GT(b.tokens_per_s, tp->tokens_per_s) << "the fastest tensor-parallel layout: " << tp->layout.str();
}

TEST(PlanPlaybook, EightyBillionNeedsPipelineOrTensorParallelismOnOneNode) {
  const Recipe recipe = model(8192, 80, 64, 8, 32768, 4096, 256);
  const Plan plan = plan_layouts(recipe, on("h100", 8));
  const bool plain = std::any_of(plan.layouts.begin(), plan.layouts.end(),
                                 [](const PlannedLayout& p) { return p.layout.tp == 1 && p.layout.pp == 1; });
  EXPECT_TRUE(plain) << "layouts without tp or pp were searched";
  for (const PlannedLayout& p : plan.layouts)
    if (p.layout.tp == 1 && p.layout.pp == 1) {
      EXPECT_FALSE(p.memory.fits) << p.layout.str();
    }
}

// The layout's twin without recompute fits no better than the chosen one does.
bool twin_without_recompute_fits(const Plan& plan, const Layout& l) {
  for (const PlannedLayout& p : plan.layouts)
    if (p.layout.dp == l.dp && p.layout.tp == l.tp && p.layout.pp == l.pp && p.layout.zero == l.zero &&
        p.layout.sp == l.sp && p.layout.micro_batch == l.micro_batch && p.layout.pp_schedule == l.pp_schedule &&
        p.layout.virtual_stages == l.virtual_stages && p.layout.recompute == "none")
      return p.memory.fits;
  return false;
}

TEST(PlanPlaybook, RecomputeOnlyWhereMemoryRequiresIt) {
  const Recipe recipe = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/bench-1b.toml");
  // With room, no recompute.
  const Plan roomy = plan_layouts(recipe, on("h100", 8, 1 << 20));
  EXPECT_EQ(best(roomy).layout.recompute, "none");
  // On one GPU with 24 GiB and a micro-batch no smaller than 8 sequences, memory requires it.
  Recipe tight = recipe;
  PlanOptions o = on("h100", 1, 8 * 2048);
  o.hardware.memory_gib = 24;
  const Plan plan = plan_layouts(tight, o);
  const PlannedLayout& b = best(plan);
  if (b.layout.recompute != "none") {
    EXPECT_FALSE(twin_without_recompute_fits(plan, b.layout)) << b.layout.str();
  }
  bool recomputes = false;
  for (const PlannedLayout& p : plan.layouts)
    if (p.memory.fits && p.layout.recompute != "none") {
      recomputes = true;
      // Every fitting layout that recomputes is slower than its twin without, where that fits.
      for (const PlannedLayout& q : plan.layouts)
        if (q.memory.fits && q.layout.recompute == "none" && q.layout.micro_batch == p.layout.micro_batch) {
          EXPECT_GE(q.tokens_per_s, p.tokens_per_s) << p.layout.str() << " recompute " << p.layout.recompute;
        }
    }
  EXPECT_TRUE(recomputes) << "some layout fits only with recompute";
}

}  // namespace
}  // namespace ustrain
