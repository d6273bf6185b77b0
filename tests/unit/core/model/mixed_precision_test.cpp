// Mixed precision on the host side: what the model plans and binds when it computes in bf16
// or fp16 (the CUDA backend runs it; the plan, the views and the compute copy are checked here
// on the CPU, which can hold and convert those dtypes).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory/memory_plan.h"
#include "core/model/llama.h"
#include "kernels/backend.h"

namespace ustrain {
namespace {

ModelSection small_model() {
  ModelSection m;
  m.vocab_size = 64;
  m.d_model = 32;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn_hidden = 48;
  m.max_seq_len = 8;
  m.init_std = 0.5;
  return m;
}

struct Planned {
  LlamaModel model;
  MemoryPlan plan;
  explicit Planned(DType compute) : model(small_model(), 2, 8, Recompute::none, compute) { model.plan(plan); }
  const PlanEntry& entry(const std::string& name) const {
    for (const PlanEntry& e : plan.entries())
      if (e.name == name) return e;
    throw std::runtime_error("no plan entry " + name);
  }
};

TEST(MixedPrecision, ActivationsTakeTheComputeDtypeAndStatisticsStayFp32) {
  const Planned p(DType::bf16);
  for (const char* name : {"residual.0", "layers.0.qkv", "layers.1.attention_out", "layers.0.gate_up", "logits",
                           "grad.residual", "grad.qkv", "branch_out"})
    EXPECT_EQ(p.entry(name).dtype, DType::bf16) << name;
  for (const char* name : {"layers.0.ln1_rstd", "layers.0.attention_lse", "losses", "cross_entropy.lse", "rope.cos",
                           "parameters", "gradients", "adam_m", "adam_v"})
    EXPECT_EQ(p.entry(name).dtype, DType::f32) << name;
  EXPECT_EQ(p.entry("input_ids").dtype, DType::i32);
}

TEST(MixedPrecision, PlanAddsAHalfWidthComputeCopyAndHalvesActivations) {
  const Planned fp32(DType::f32), bf16(DType::bf16), fp16(DType::f16);
  const auto flat = static_cast<std::size_t>(bf16.model.params().flat_size());
  EXPECT_EQ(bf16.entry("parameters.compute_copy").bytes, flat * 2);
  EXPECT_EQ(fp16.entry("parameters.compute_copy").dtype, DType::f16);
  // fp32 master values plus the bf16 copy (one alignment gap between them at most).
  EXPECT_GE(bf16.plan.bytes(MemCategory::parameters), fp32.plan.bytes(MemCategory::parameters) + flat * 2);
  EXPECT_LE(bf16.plan.bytes(MemCategory::parameters),
            fp32.plan.bytes(MemCategory::parameters) + flat * 2 + MemoryPlan::kAlignment);
  EXPECT_EQ(bf16.plan.bytes(MemCategory::gradients), fp32.plan.bytes(MemCategory::gradients));
  EXPECT_EQ(bf16.plan.bytes(MemCategory::optimizer), fp32.plan.bytes(MemCategory::optimizer));
  EXPECT_LT(bf16.plan.bytes(MemCategory::activations), fp32.plan.bytes(MemCategory::activations) * 6 / 10);
}

TEST(MixedPrecision, TheModelComputesWithTheRoundedCopyOfTheMasterWeights) {
  Planned p(DType::bf16);
  auto backend = make_backend(Device::cpu, 1);
  PlannedMemory memory(p.plan, *backend);
  p.model.bind(memory, *backend);
  p.model.initialise(*backend, 7);
  const ModelParams& params = p.model.params();
  for (std::size_t i = 0; i < params.specs().size(); ++i) {
    const ParamViews& v = params[static_cast<int>(i)];
    EXPECT_EQ(v.value.dtype, DType::bf16) << params.specs()[i].name;
    EXPECT_EQ(v.grad.dtype, DType::f32) << params.specs()[i].name;
  }
  // Each compute value is the master value rounded to bf16, after init and after a change.
  const Tensor master = params.dense().all_values();
  const auto check_copy = [&] {
    const auto n = static_cast<std::size_t>(master.numel());
    std::vector<float> rounded(n), widened(n);
    std::vector<std::uint16_t> narrow(n);
    backend->convert(Tensor(narrow.data(), master.shape, DType::bf16), master);
    backend->convert(Tensor(rounded.data(), master.shape), Tensor(narrow.data(), master.shape, DType::bf16));
    const Tensor embed = params[0].value;  // model.embed_tokens.weight, first in the flat space
    backend->convert(Tensor(widened.data(), embed.shape), embed);
    for (std::int64_t j = 0; j < embed.numel(); ++j) ASSERT_EQ(widened[static_cast<std::size_t>(j)], rounded[static_cast<std::size_t>(j)]);
  };
  check_copy();
  backend->scale(master, 1.7f);
  params.refresh_compute_copy(*backend);
  check_copy();
}

TEST(MixedPrecision, Fp32ComputesWithTheMasterWeightsThemselves) {
  Planned p(DType::f32);
  auto backend = make_backend(Device::cpu, 1);
  PlannedMemory memory(p.plan, *backend);
  p.model.bind(memory, *backend);
  EXPECT_EQ(p.model.params()[0].value.data, p.model.params().dense().all_values().data);
  for (const PlanEntry& e : p.plan.entries()) EXPECT_NE(e.name, "parameters.compute_copy");
}

}  // namespace
}  // namespace ustrain
