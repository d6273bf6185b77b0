// The gradient sync of parallel.overlap_comm leaves in buckets while backward fills them
// (core/plan/comm_cost.h): with one micro-batch, most of it hides under the backward that
// produces it, and only what outlasts that backward (at least the last bucket) is exposed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/plan/planner.h"

namespace ustrain {
namespace {

// A small Llama-style model on 16 GPUs of two nodes (no ZeRO), one micro-batch a step.
Recipe one_micro_batch(bool overlap) {
  return parse_recipe(fmt::format(R"(
[model]
vocab_size = 32000
d_model = 1024
n_layers = 4
n_heads = 16
n_kv_heads = 8
ffn_hidden = 2816
max_seq_len = 4096
[data]
path = "unused"
tokenizer = "external"
[train]
micro_batch = 16
global_batch = 256
seq_len = 4096
precision = "bf16"
eval_interval = 0
[parallel]
dp = 16
zero = 0
overlap_comm = {}
[device]
type = "cuda"
)",
                                  overlap),
                      "test recipe");
}

StepTimeModel two_nodes() {
  const Hardware hw = gpu_hardware("h100");
  return StepTimeModel(hw, default_gpu_calibration(hw, DType::bf16), 8, Device::cuda, 8);
}

TEST(PlanSyncOverlap, BucketsLeaveWhileBackwardFillsThem) {
  StepTimeModel model = two_nodes();
  const StepTime hidden = model.predict(one_micro_batch(true));
  const StepTime exposed = model.predict(one_micro_batch(false));
  ASSERT_TRUE(hidden.dp_across_nodes);
  EXPECT_EQ(hidden.compute_s, exposed.compute_s);
  // Without overlap the whole sync waits; with it, only the part backward cannot cover.
  EXPECT_GT(exposed.dp_s, 0.0);
  EXPECT_LT(hidden.dp_s, 0.5 * exposed.dp_s) << "overlapped " << hidden.dp_s << " s, exposed " << exposed.dp_s << " s";
  EXPECT_GT(hidden.dp_s, 0.0);  // the last bucket leaves after backward ends
  EXPECT_LT(hidden.step_s, exposed.step_s);
}

}  // namespace
}  // namespace ustrain
