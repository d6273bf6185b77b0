// The memory plan's op-scratch line: the most scratch any op of the rank's recorded step takes
// (core/plan/step_scratch.h), only on CUDA, listed, counted in the total, and handed to the
// backend while the plan is allocated; a backend is asked for every op of the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/memory/memory_plan.h"
#include "core/plan/step_profile.h"
#include "core/plan/step_scratch.h"
#include "core/recipe/recipe.h"
#include "core/plan/rank_memory.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/cuda/fp8/fp8_scratch_sizes.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/library_workspace.h"
#include "kernels/record/op_scratch.h"

namespace ustrain {
namespace {

Recipe quickstart_on(const std::string& device, const std::string& precision = "bf16") {
  Recipe r = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/quickstart.toml", {});
  r.device.type = device;
  r.train.precision = device == "cpu" ? "fp32" : precision;
  r.parallel.dp = 1;  // as one process resolves it
  return r;
}

TEST(OpScratchPlan, IsTheMostAnyOpOfTheRecordedStepTakes) {
  const Recipe r = quickstart_on("cuda");
  const RankProfile step = record_rank_step(r, 0, Device::cuda);
  std::size_t most = 0;
  for (const ActionProfile& a : step.actions)
    for (const RecordedOp& op : a.ops) most = std::max(most, cuda_op_scratch_bytes(op));
  for (const RecordedOp& op : step.tail_ops) most = std::max(most, cuda_op_scratch_bytes(op));
  EXPECT_EQ(deviceless_op_scratch(r, 0), most);
  // At least the embedding's sort over the micro-batch's ids and cuDNN's fp32 dQ accumulator.
  const std::int64_t B = r.train.micro_batch, S = r.train.seq_len, H = r.model.n_heads, Dh = r.head_dim();
  EXPECT_GE(most, cuda::embedding_backward_scratch_bytes(B * S));
  EXPECT_GE(most, cuda::backward_scratch(cuda::AttentionDims{B, S, H, r.model.n_kv_heads, Dh}).bytes);
}

TEST(OpScratchPlan, ACudaRanksPlanHoldsItAndTheCpusNone) {
  const MemoryPlan cpu = plan_rank_memory(quickstart_on("cpu"), 0).plan;
  const MemoryPlan cuda = plan_rank_memory(quickstart_on("cuda"), 0).plan;
  const std::size_t scratch = deviceless_op_scratch(quickstart_on("cuda"), 0);
  ASSERT_GT(scratch, 0u);
  EXPECT_EQ(deviceless_op_scratch(quickstart_on("cpu"), 0), 0u);
  EXPECT_EQ(cpu.bytes(MemCategory::op_scratch), 0u);
  EXPECT_EQ(cuda.bytes(MemCategory::op_scratch), (scratch + 3) / 4 * 4);
  EXPECT_EQ(cpu.summary().find("op scratch"), std::string::npos);
  EXPECT_NE(cuda.summary().find("op scratch"), std::string::npos) << cuda.summary();
}

// fp8 on CUDA: the op scratch also holds the largest FP8 GEMM's quantised operands (the
// kernels' own sizes, kernels/cuda/fp8/fp8_scratch_sizes.h), for every recipe; on the CPU none.
TEST(OpScratchPlan, Fp8OnCudaHoldsTheLargestGemmsQuantisedOperands) {
  for (const char* recipe : {"delayed", "current", "rowwise", "blockwise"}) {
    SCOPED_TRACE(recipe);
    Recipe r = quickstart_on("cuda", "fp8");
    r.train.fp8_recipe = recipe;
    r.model.ffn_hidden = 2048;  // so that an FP8 GEMM takes more than any other op
    const std::int64_t N = r.train.micro_batch * r.train.seq_len, D = r.model.d_model, F = r.model.ffn_hidden;
    const std::int64_t Dh = r.head_dim(), H = r.model.n_heads, KV = r.model.n_kv_heads;
    const fp8::Recipe fr = fp8::recipe_named(recipe);
    // (out, in) of q/k/v packed, o, gate/up packed, down
    const std::pair<std::int64_t, std::int64_t> gemms[] = {{(H + 2 * KV) * Dh, D}, {D, H * Dh}, {2 * F, D}, {D, F}};
    std::size_t fp8_most = 0;
    for (const auto& [out, in] : gemms) fp8_most = std::max(fp8_most, cuda::fp8_linear_scratch_bytes(fr, N, in, out));
    ASSERT_GT(fp8_most, deviceless_op_scratch(r, 0));
    EXPECT_EQ(plan_rank_memory(r, 0).plan.bytes(MemCategory::op_scratch), (fp8_most + 3) / 4 * 4);
    // x^T of the down projection's weight gradient alone: N x F bytes of FP8 codes
    EXPECT_GE(fp8_most, static_cast<std::size_t>(N * F));
  }
  // On the CPU the FP8 GEMMs' operands are host buffers of their own (fp8.cpu_operands); the
  // op scratch holds only the 16-bit tensors' fp32 stand-ins.
  Recipe cpu = quickstart_on("cpu");
  cpu.train.precision = "fp8";
  const std::size_t widening = deviceless_op_scratch(cpu, 0);
  EXPECT_GT(widening, 0u);
  EXPECT_EQ(plan_rank_memory(cpu, 0).plan.bytes(MemCategory::op_scratch), (widening + 3) / 4 * 4);
}

// A backend that says each op takes scratch by its name, as the CUDA backend would.
class AskedBackend : public CpuBackend {
 public:
  AskedBackend() : CpuBackend(1) {}
  Device device() const override { return Device::cuda; }  // asked as a GPU would be; runs nothing
  std::size_t op_scratch_bytes(const RecordedOp& op) override {
    ++asked;
    return std::string(op.name) == "attention_block_backward" ? 12345 : 7;
  }
  int asked = 0;
};

// A CPU backend that records the op scratch it is handed.
class HandedBackend : public CpuBackend {
 public:
  HandedBackend() : CpuBackend(1) {}
  void use_op_scratch(void* scratch, std::size_t bytes) override { handed.emplace_back(scratch, bytes); }
  std::vector<std::pair<void*, std::size_t>> handed;
};

TEST(OpScratchPlan, ARunAsksItsBackendForEveryOpOfTheStep) {
  AskedBackend backend;
  const StepScratch s = backend_op_scratch(quickstart_on("cuda"), 0, backend);
  EXPECT_EQ(s.bytes, 12345u);
  EXPECT_EQ(s.op, "attention_block_backward");
  EXPECT_GT(backend.asked, 10);
  CpuBackend cpu(1);  // the CPU records nothing and plans none
  EXPECT_EQ(backend_op_scratch(quickstart_on("cpu"), 0, cpu).bytes, 0u);
}

TEST(OpScratchPlan, PlannedMemoryHandsItToTheBackendAndTakesItBack) {
  MemoryPlan plan;
  plan.add("x", MemCategory::parameters, Shape{4});
  plan_op_scratch(1000, plan);
  EXPECT_EQ(plan.bytes(MemCategory::op_scratch), 1000u);
  HandedBackend backend;
  {
    PlannedMemory memory(plan, backend);
    ASSERT_EQ(backend.handed.size(), 1u);
    EXPECT_EQ(backend.handed[0].first, memory.category(MemCategory::op_scratch).data);
    EXPECT_EQ(backend.handed[0].second, 1000u);
  }
  ASSERT_EQ(backend.handed.size(), 2u);
  EXPECT_EQ(backend.handed[1].first, nullptr);
  MemoryPlan none;
  plan_op_scratch(0, none);
  EXPECT_TRUE(none.entries().empty());
}

}  // namespace
}  // namespace ustrain
