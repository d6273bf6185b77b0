// The CPU backend's 16-bit storage widens each op's bf16 / fp16 tensors into fp32 stand-ins in
// the planned op scratch: a real training step of the quickstart models, planned as the trainer
// plans it (core/plan/step_scratch.h), never needs more than the plan holds.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/plan/step_scratch.h"
#include "core/recipe/recipe.h"
#include "core/step/run_schedule.h"
#include "core/step/model_instance.h"
#include "core/step/training_step.h"
#include "kernels/cpu/cpu_mixed_backend.h"
#include "parallel/counting_world.h"

namespace ustrain {
namespace {

struct Case {
  const char* recipe;
  const char* precision;
};

class CpuWideningPlan : public ::testing::TestWithParam<Case> {};

TEST_P(CpuWideningPlan, ATrainingStepStaysWithinThePlannedOpScratch) {
  const Case c = GetParam();
  const Recipe recipe = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/" + c.recipe,
                                    {"model.vocab_size=257", "parallel.dp=1", "train.micro_batch=2", "train.global_batch=4",
                                     "train.seq_len=64", "model.n_layers=2", "train.eval_interval=0", "device.threads=1",
                                     std::string("train.precision=") + c.precision});
  const Mesh mesh(MeshShape{}, 0, 1);
  const std::unique_ptr<ProcessGroups> groups = counting_process_groups(mesh, Device::cpu);
  std::unique_ptr<Backend> backend = make_recipe_backend(recipe);
  auto* mixed = dynamic_cast<CpuMixedBackend*>(backend.get());
  ASSERT_NE(mixed, nullptr) << c.precision << " on the CPU runs on the mixed-precision backend";
  const StepScratch planned = backend_op_scratch(recipe, 0, *backend);
  EXPECT_GT(planned.bytes, 0u);
  TrainingRank run(recipe, *groups, std::move(backend), kGradientBucketBytes, MemoryShare{},
                   /*saves_checkpoints=*/false, planned.bytes);

  const auto micro_batches = static_cast<std::size_t>(recipe.grad_accum_steps());
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(recipe.train.micro_batch * recipe.train.seq_len));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 37) % 257);
  const std::vector<TokenBatch> micro(micro_batches, TokenBatch{tokens, tokens});
  PhaseTimer timer;
  for (std::int64_t step = 1; step <= 1; ++step) train_step(run, micro, schedule_of(recipe), step, timer, nullptr);
  EXPECT_FALSE(mixed->unplanned_widening()) << "an op of the step widened past the " << planned.bytes
                                            << " planned bytes (largest planned: " << planned.op << ")";
}

INSTANTIATE_TEST_SUITE_P(Models, CpuWideningPlan,
                         ::testing::Values(Case{"quickstart.toml", "bf16"}, Case{"quickstart.toml", "fp16"},
                                           Case{"quickstart.toml", "fp8"}, Case{"moe-quickstart.toml", "bf16"}),
                         [](const auto& info) {
                           return std::string(info.param.recipe[0] == 'm' ? "moe_" : "dense_") + info.param.precision;
                         });

}  // namespace
}  // namespace ustrain
