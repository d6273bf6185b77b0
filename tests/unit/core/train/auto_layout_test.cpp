// parallel.layout = "auto": the trainer's choice is the planner's best layout for the launch,
// the keys set by hand constrain it as `ustrain plan --set` does, a recipe that fits no layout
// is one message, and the choice travels between ranks (and into run.json) whole.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "core/plan/hardware.h"
#include "core/plan/planner.h"
#include "core/train/auto_layout.h"
#include "kernels/error.h"
#include "parallel/comm/self_communicator.h"

namespace ustrain {
namespace {

// A small model on GPUs (published figures: no measurement), its layout left to the planner.
Recipe gpu_recipe(const std::string& parallel = "", int n_layers = 4, int d_model = 256, int global_batch = 16) {
  return parse_recipe(fmt::format(R"(
[model]
vocab_size = 1024
d_model = {}
n_layers = {}
n_heads = 8
n_kv_heads = 4
ffn_hidden = {}
max_seq_len = 256
[data]
path = "unused"
tokenizer = "external"
[train]
micro_batch = 1
global_batch = {}
seq_len = 256
precision = "bf16"
eval_interval = 0
[parallel]
layout = "auto"
{}
[device]
type = "cuda"
)",
                                  d_model, n_layers, 4 * d_model, global_batch, parallel),
                      "auto.toml");
}

AutoLayoutAsk on_h100(int processes, std::set<std::string> set_by_hand = {}) {
  AutoLayoutAsk ask;
  ask.processes = processes;
  ask.processes_per_node = std::min(processes, 8);
  ask.device = "h100";
  ask.set_by_hand = std::move(set_by_hand);
  return ask;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AutoLayout, ChoosesThePlannersBestLayoutForTheProcesses) {
  const Recipe recipe = gpu_recipe();
  const AutoLayout chosen = choose_layout(recipe, on_h100(4));
  const Layout& l = chosen.layout;
  EXPECT_EQ(l.dp * l.tp * l.pp * l.cp, 4);
  PlanOptions options;
  options.devices = 4;
  options.devices_per_node = 4;
  options.gpu = "h100";
  const PlannedLayout best = plan_layouts(recipe, options).layouts.front();
  EXPECT_EQ(l.str(), best.layout.str());
  EXPECT_EQ(l.zero, best.layout.zero);
  EXPECT_EQ(l.micro_batch, best.layout.micro_batch);
  EXPECT_EQ(chosen.step_s, best.time.step_s);
  EXPECT_EQ(chosen.memory_bytes, best.memory.bytes);
  EXPECT_GT(chosen.layouts_searched, 1);
}

TEST(AutoLayout, KeysSetByHandConstrainTheSearchAsPlanSetDoes) {
  const AutoLayout free = choose_layout(gpu_recipe(), on_h100(4));
  ASSERT_EQ(free.layout.tp, 1) << "the test needs a free choice other than tp = 2";
  const AutoLayout tp2 = choose_layout(gpu_recipe("tp = 2"), on_h100(4, {"parallel.tp", "parallel.layout"}));
  EXPECT_EQ(tp2.layout.tp, 2);
  EXPECT_EQ(tp2.layout.dp * tp2.layout.pp, 2);
  EXPECT_EQ(tp2.fixed, std::set<std::string>{"parallel.tp"});
  // A value the recipe holds but the user did not set is searched.
  const AutoLayout unset = choose_layout(gpu_recipe("tp = 2"), on_h100(4));
  EXPECT_EQ(unset.layout.tp, free.layout.tp);
  EXPECT_NE(auto_layout_line(tp2).find("set by hand: parallel.tp"), std::string::npos) << auto_layout_line(tp2);
}

TEST(AutoLayout, AnImpossibleKeySetByHandGetsThePlannersMessage) {
  // dp 3 alone would take the batch of 24.
  const std::string error =
      error_of([] { choose_layout(gpu_recipe("tp = 2", 4, 256, 24), on_h100(3, {"parallel.tp"})); });
  EXPECT_NE(error.find("no layout of 3 devices has parallel.tp = 2, set by hand"), std::string::npos) << error;
}

TEST(AutoLayout, NoFittingLayoutIsOneMessageNamingTheSmallest) {
  // 48 layers of width 8192 (~40 B parameters) on one 80 GB GPU.
  const std::string error = error_of([] { choose_layout(gpu_recipe("", 48, 8192), on_h100(1)); });
  for (const char* part : {"auto.toml: parallel.layout = \"auto\" for 1 process(es) on h100", "no layout fits",
                           "GiB per device", "use more devices", "parallel.layout = \"manual\""})
    EXPECT_NE(error.find(part), std::string::npos) << part << " in: " << error;
}

TEST(AutoLayout, TheChoiceBecomesTheRecipesLayoutKeys) {
  const Recipe recipe = gpu_recipe();
  AutoLayout chosen;
  chosen.layout = Layout{.dp = 2, .tp = 2, .pp = 1, .zero = 1, .sp = true, .recompute = "selective",
                         .micro_batch = 2, .grad_accum = 4};
  const Recipe r = with_auto_layout(recipe, chosen);
  EXPECT_EQ(r.parallel.dp, 2);
  EXPECT_EQ(r.parallel.tp, 2);
  EXPECT_EQ(r.parallel.zero, 1);
  EXPECT_TRUE(r.parallel.sp);
  EXPECT_EQ(r.train.micro_batch, 2);
  EXPECT_EQ(r.train.recompute, "selective");
  EXPECT_EQ(r.train.global_batch, recipe.train.global_batch);
  EXPECT_EQ(r.parallel.layout, "auto");
}

TEST(AutoLayout, TheRecordRoundTripsExactly) {
  const AutoLayout chosen = choose_layout(gpu_recipe("tp = 2"), on_h100(4, {"parallel.tp"}));
  const nlohmann::json j = auto_layout_json(chosen);
  const AutoLayout back = auto_layout_of(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(auto_layout_json(back), j);
  EXPECT_EQ(back.layout.overrides(), chosen.layout.overrides());
  EXPECT_EQ(j["layout"]["tp"], 2);
  EXPECT_EQ(j["device"], "h100");
}

TEST(AutoLayout, RankZerosChoiceOrErrorReachesEveryRank) {
  SelfCommunicator one(0, "world");
  AutoLayout chosen;
  chosen.layout.dp = 3;
  chosen.step_s = 0.1 + 0.2;
  const AutoLayout got = agreed_layout(one, [&] { return chosen; });
  EXPECT_EQ(got.layout.dp, 3);
  EXPECT_EQ(got.step_s, chosen.step_s);
  EXPECT_EQ(error_of([&] { agreed_layout(one, []() -> AutoLayout { throw UserError("no layout fits: why"); }); }),
            "no layout fits: why");
}

TEST(AutoLayout, TheGpuIsNamedAsThePlannerKnowsIt) {
  EXPECT_EQ(described_gpu("NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"), "h100");
  EXPECT_EQ(described_gpu("NVIDIA H200 (sm_90, 139.8 GiB)"), "h200");
  EXPECT_EQ(described_gpu("NVIDIA A100-SXM4-80GB (sm_80, 79.2 GiB)"), "a100");
  const std::string error = error_of([] { described_gpu("NVIDIA GeForce RTX 4090 (sm_89, 23.6 GiB)"); });
  EXPECT_NE(error.find("RTX 4090"), std::string::npos) << error;
  EXPECT_NE(error.find("parallel.layout = \"manual\""), std::string::npos) << error;
}

}  // namespace
}  // namespace ustrain
