// The planner searches hybrid sharding (parallel.dp_shard) where the data-parallel ranks span
// nodes: ZeRO-3's parameter gathers then run inside a block of dp_shard ranks, on the links that
// block spans (NVLink when it fits in a node), and only the gradient shards cross the nodes.
// Sharding over all of dp (dp_shard = dp) is today's plain ZeRO and prices exactly as it.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/plan/planner.h"
#include "core/plan/plan_report.h"

namespace ustrain {
namespace {

// A small Llama-style model on `dp` GPUs with ZeRO-3, sharded over blocks of `dp_shard`.
Recipe zero3(int dp, int dp_shard) {
  return parse_recipe(fmt::format(R"(
[model]
vocab_size = 32000
d_model = 1024
n_layers = 4
n_heads = 16
n_kv_heads = 8
ffn_hidden = 2816
max_seq_len = 512
[data]
path = "unused"
tokenizer = "external"
[train]
micro_batch = 1
global_batch = {}
seq_len = 512
precision = "bf16"
eval_interval = 0
[parallel]
dp = {}
zero = 3
dp_shard = {}
[device]
type = "cuda"
)",
                                  2 * dp, dp, dp_shard),
                      "test recipe");
}

// Two nodes of 8 H100s whose inter-node link is `inter_gbps` GB/s per GPU.
StepTimeModel two_nodes(double inter_gbps) {
  const Hardware hw = with_overrides(gpu_hardware("h100"), {.inter_node_gbps = inter_gbps});
  return StepTimeModel(hw, default_gpu_calibration(hw, DType::bf16), 8, Device::cuda, 8);
}

TEST(PlanHybridSharding, ZeroThreeGathersStayInsideTheNodeOverASlowInterNodeLink) {
  StepTimeModel model = two_nodes(5);
  const StepTime plain = model.predict(zero3(16, 0));
  const StepTime hybrid = model.predict(zero3(16, 8));  // one block per node
  EXPECT_TRUE(plain.dp_across_nodes);
  EXPECT_TRUE(hybrid.dp_across_nodes);  // the gradient shards still cross
  EXPECT_LT(hybrid.dp_s, plain.dp_s);
  EXPECT_LT(hybrid.step_s, 0.9 * plain.step_s) << "hybrid " << hybrid.step_s << " s, plain " << plain.step_s << " s";
}

TEST(PlanHybridSharding, ShardingOverAllOfDpPricesAsPlainZero) {
  StepTimeModel model = two_nodes(5);
  const StepTime plain = model.predict(zero3(16, 0));
  const StepTime all = model.predict(zero3(16, 16));
  EXPECT_EQ(all.step_s, plain.step_s);
  EXPECT_EQ(all.dp_s, plain.dp_s);
  EXPECT_EQ(all.compute_s, plain.compute_s);
  EXPECT_NE(model.predict(zero3(16, 4)).step_s, plain.step_s);  // what it is compared with can differ
}

TEST(PlanHybridSharding, ShardChoicesAreTheLargestBlockInANodeAndWholeNodes) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(shard_choices(8, 1, 1, 3, 8), V{0});       // one node: plain ZeRO alone
  EXPECT_EQ(shard_choices(16, 1, 1, 0, 8), V{0});      // ZeRO-0 shards nothing
  EXPECT_EQ(shard_choices(16, 1, 1, 1, 8), (V{0, 8}));  // the largest block within a node
  EXPECT_EQ(shard_choices(8, 1, 2, 3, 8), (V{0, 4}));   // dp_shard 4 of tp 2: 8 ranks
  EXPECT_EQ(shard_choices(12, 1, 1, 2, 8), (V{0, 4}));  // blocks of 3 or 6 would straddle nodes
  EXPECT_EQ(shard_choices(32, 1, 1, 3, 8), (V{0, 8, 16}));  // and blocks of whole nodes
  EXPECT_EQ(shard_choices(16, 2, 8, 3, 8), (V{0, 1, 2, 4, 8}));  // cp x tp fill a node already
}

TEST(PlanHybridSharding, PlanOffersHybridShardingAcrossNodesAndPastesIt) {
  PlanOptions o;
  o.devices = 16;
  o.gpu = "h100";
  o.hardware.inter_node_gbps = 5;
  o.fixed_keys = {"parallel.zero", "parallel.tp", "parallel.pp"};
  Recipe given = zero3(16, 0);
  const Plan plan = plan_layouts(given, o);
  const PlannedLayout& best = plan.layouts.front();
  ASSERT_TRUE(best.memory.fits);
  EXPECT_TRUE(best.layout.hybrid()) << best.layout.str();
  const std::string text = plan_text(plan, PlanCommand{"r.toml", {}}, 3);
  EXPECT_NE(text.find(fmt::format("--set parallel.dp_shard={}", best.layout.dp_shard)), std::string::npos) << text;
  EXPECT_NE(text.find("shard"), std::string::npos);
  EXPECT_NE(plan_json(plan).find("\"dp_shard\""), std::string::npos);
  // Layouts that shard over all of dp are still searched, and paste no dp_shard.
  const auto plain = std::find_if(plan.layouts.begin(), plan.layouts.end(),
                                  [](const PlannedLayout& p) { return p.layout.dp == 16 && !p.layout.hybrid(); });
  ASSERT_NE(plain, plan.layouts.end());
  for (const std::string& s : plain->layout.overrides()) EXPECT_EQ(s.find("dp_shard"), std::string::npos) << s;
}

TEST(PlanHybridSharding, ADpShardSetByHandKeepsItsBlocks) {
  SearchSpace space{16, 8, 32, false};
  space.fixed = {"parallel.dp_shard"};
  space.given.dp_shard = 8;
  EXPECT_TRUE(keeps(Layout{.dp = 16, .zero = 3, .dp_shard = 8}, space));
  EXPECT_TRUE(keeps(Layout{.dp = 8, .tp = 2, .zero = 3}, space));  // all of dp is 8 ranks
  EXPECT_FALSE(keeps(Layout{.dp = 16, .zero = 3}, space));
  EXPECT_FALSE(keeps(Layout{.dp = 16, .zero = 3, .dp_shard = 4}, space));
  EXPECT_EQ(given_value("parallel.dp_shard", space.given), "8");
  // A value the search would not try by itself is tried when set by hand.
  space.given.dp_shard = 2;
  const LayoutSearch search = enumerate_layouts(zero3(16, 0), space);
  ASSERT_FALSE(search.candidates.empty());
  for (const Candidate& c : search.candidates) EXPECT_EQ(c.layout.shard_dp(), 2) << c.layout.str();
}

}  // namespace
}  // namespace ustrain
