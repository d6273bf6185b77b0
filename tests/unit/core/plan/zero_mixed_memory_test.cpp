// Mixed-precision ZeRO's memory per rank (core/model/param_store.h): from stage 1 on the fp32
// master weights are sharded with the AdamW moments, beside a 16-bit compute copy that is whole
// at stages 0-2 and sharded at stage 3, whose gathered layers are 16-bit too.
#include <gtest/gtest.h>

#include "core/model/llama.h"
#include "kernels/backend.h"

namespace ustrain {
namespace {

ModelSection small_model() {
  ModelSection m;
  m.vocab_size = 50;
  m.d_model = 16;
  m.n_layers = 3;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn_hidden = 40;
  m.max_seq_len = 8;
  return m;
}

struct Planned {
  LlamaModel model;
  MemoryPlan plan;
  Planned(ParamSharding s, DType compute) : model(small_model(), 1, 8, Recompute::none, compute) {
    model.plan(plan, s);
  }
  const ParamStore& store() const { return model.params().dense(); }
};

std::size_t bytes_of(const MemoryPlan& plan, const std::string& name) {
  for (const PlanEntry& e : plan.entries())
    if (e.name == name) return e.bytes;
  return 0;
}

TEST(ZeroMixedMemory, MastersAreShardedWithTheMomentsAndTheCopyWithTheValues) {
  for (DType compute : {DType::bf16, DType::f16})
    for (int n : {1, 2, 4, 8})
      for (int zero = 0; zero <= 3; ++zero) {
        SCOPED_TRACE(testing::Message() << dtype_name(compute) << ", dp " << n << ", ZeRO stage " << zero);
        const Planned p(ParamSharding{n, n - 1, zero}, compute);
        const auto psi = static_cast<std::size_t>(p.store().flat_size());
        const std::size_t shard = psi / static_cast<std::size_t>(n);
        const bool split = n > 1;
        const std::size_t masters = 4 * (split && zero >= 1 ? shard : psi);
        const std::size_t copy = 2 * (split && zero >= 3 ? shard : psi);
        EXPECT_EQ(p.store().shards_masters(), split && zero >= 1);
        EXPECT_EQ(bytes_of(p.plan, split && zero >= 1 ? "parameters.shard" : "parameters"), masters);
        EXPECT_EQ(bytes_of(p.plan, split && zero >= 3 ? "parameters.compute_copy.shard" : "parameters.compute_copy"),
                  copy);
        EXPECT_GE(p.plan.bytes(MemCategory::parameters), masters + copy);
        EXPECT_LT(p.plan.bytes(MemCategory::parameters), masters + copy + MemoryPlan::kAlignment);
        EXPECT_EQ(p.plan.bytes(MemCategory::gradients), 4 * (split && zero >= 2 ? shard : psi));
        EXPECT_EQ(p.plan.bytes(MemCategory::optimizer), 8 * (split && zero >= 1 ? shard : psi));
        const std::size_t unit = static_cast<std::size_t>(p.store().largest_unit());
        EXPECT_EQ(bytes_of(p.plan, "zero.gathered_layers"), split && zero >= 3 ? ParamStore::kValueSlots * unit * 2 : 0);
        EXPECT_EQ(bytes_of(p.plan, "zero.gradient_buckets"), split && zero >= 2 ? ParamStore::kGradSlots * unit * 4 : 0);
      }
}

TEST(ZeroMixedMemory, FpThirtyTwoKeepsItsWholeValuesBelowStageThree) {
  for (int zero = 0; zero <= 2; ++zero) {
    const Planned p(ParamSharding{4, 0, zero}, DType::f32);
    EXPECT_FALSE(p.store().shards_masters());
    EXPECT_EQ(bytes_of(p.plan, "parameters"), 4 * static_cast<std::size_t>(p.store().flat_size()));
  }
}

TEST(ZeroMixedMemory, TheOptimizerWritesTheCopyOfWhatItUpdates) {
  for (int zero = 0; zero <= 3; ++zero) {
    SCOPED_TRACE(testing::Message() << "ZeRO stage " << zero);
    Planned p(ParamSharding{4, 1, zero}, DType::bf16);
    auto backend = make_backend(Device::cpu, 1);
    PlannedMemory memory(p.plan, *backend);
    p.model.bind(memory, *backend);
    std::int64_t updated = 0;
    for (const OptimizerPiece& piece : p.store().optimizer_pieces()) {
      EXPECT_EQ(piece.value.numel(), piece.end - piece.begin);
      EXPECT_EQ(piece.compute_copy.numel(), piece.end - piece.begin);
      EXPECT_EQ(piece.compute_copy.dtype, DType::bf16);
      updated += piece.end - piece.begin;
    }
    // This rank's chunks (a quarter, less padding) from stage 1 on, every parameter at stage 0.
    EXPECT_EQ(updated == p.model.params().count(), zero == 0);
    std::int64_t held = 0;
    for (const ParamPiece& piece : p.store().held(ParamState::value)) held += piece.end - piece.begin;
    EXPECT_EQ(held, updated) << "the masters held are those updated";
  }
}

}  // namespace
}  // namespace ustrain
