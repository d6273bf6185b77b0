// Impossible models are user errors with their numbers, found before anything is allocated:
// the recipe's own arithmetic (core/recipe/model_size.h), the memory plan's byte counts, and the plan
// against the memory it is about to be allocated in (core/step/memory_fit.h).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/step/memory_fit.h"
#include "core/model/llama.h"
#include "core/step/model_instance.h"
#include "core/recipe/model_size.h"
#include "core/recipe/recipe.h"
#include "kernels/error.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

Recipe recipe(const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> all = {"model.vocab_size=300", "model.d_model=32", "model.n_layers=3",
                                  "model.n_heads=4",      "model.n_kv_heads=2", "model.ffn_hidden=48",
                                  "model.max_seq_len=16", "train.seq_len=16",   "train.micro_batch=2",
                                  "train.global_batch=4", "parallel.dp=1",      "data.tokenizer=byte"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return parse_recipe("[data]\npath = \"d\"\n", "m.toml", all);
}

TEST(ModelSize, CountsTheParametersTheModelDeclares) {
  for (const std::vector<std::string>& o : std::vector<std::vector<std::string>>{
           {}, {"model.tied_embeddings=true"}, {"model.n_kv_heads=4"}, {"model.n_kv_heads=1", "model.n_layers=5"}}) {
    const Recipe r = recipe(o);
    const LlamaModel model(r.model, 1, 1, Recompute::none);
    EXPECT_EQ(model_size(r).parameters, static_cast<long double>(model.params().count())) << to_toml(r);
  }
}

TEST(ModelSize, EachPipelineRankHoldsWhatItsGeometryCounts) {
  for (const char* tied : {"model.tied_embeddings=false", "model.tied_embeddings=true"})
    for (int pp : {1, 2, 4}) {
      SCOPED_TRACE(testing::Message() << tied << ", pp " << pp);
      const Recipe r = recipe({tied, "model.n_layers=4"});
      for (int rank = 0; rank < pp; ++rank) {
        const ModelGeometry geometry = ModelGeometry::of(r.model, ModelSplit{1, 0, false, pp, rank, 1}, 1);
        const LlamaModel model(r.model, geometry, 1, Recompute::none);
        std::int64_t held = 0;
        for (const ParamSpec& s : model.params().specs()) held += s.shape.numel();
        EXPECT_EQ(geometry.held_params(), held) << "pipeline rank " << rank;
        EXPECT_EQ(geometry.total_params(), model.params().count());
      }
    }
}

TEST(ModelSize, TheStateBoundIsAtMostWhatTheRankPlans) {
  for (const char* precision : {"fp32", "bf16"})
    for (int tp : {1, 2})
      for (int zero = 0; zero <= 3; ++zero) {
        SCOPED_TRACE(testing::Message() << precision << ", tp " << tp << ", ZeRO stage " << zero);
        const Recipe r = recipe({"parallel.tp=" + std::to_string(tp), "parallel.dp=2", "parallel.zero=" +
                                 std::to_string(zero), std::string("train.precision=") + precision});
        const ModelGeometry geometry = ModelGeometry::of(r.model, ModelSplit{tp, 0, r.parallel.sp}, 16);
        LlamaModel model(r.model, geometry, 2, Recompute::none,
                         std::string(precision) == "bf16" ? DType::bf16 : DType::f32);
        MemoryPlan plan;
        plan_model(model, plan, ParamSharding{2, 0, zero});
        const std::size_t state = plan.bytes(MemCategory::parameters) + plan.bytes(MemCategory::gradients) +
                                  plan.bytes(MemCategory::optimizer);
        EXPECT_LE(model_size(r).state_bytes_per_rank, static_cast<long double>(state));
        EXPECT_GT(model_size(r).state_bytes_per_rank, 0.8L * static_cast<long double>(state));
      }
}

TEST(ModelSize, FitsPlanningUnlessBeyondAnyMachine) {
  EXPECT_FALSE(model_size_problem(recipe()).has_value());
  // Checked before the recipe rules run it: parse would refuse these.
  Recipe huge = recipe();
  huge.model.vocab_size = std::int64_t{1} << 62;
  huge.model.d_model = std::int64_t{1} << 40;
  huge.model.n_heads = huge.model.n_kv_heads = 1;
  const std::optional<std::string> problem = model_size_problem(huge);
  ASSERT_TRUE(problem.has_value());
  expect_mentions(*problem, {"3 layers", "d_model 1099511627776", "vocabulary of 4611686018427387904",
                             "parameters x 16 bytes", "more than any machine has"});
}

TEST(MemoryPlan, ByteCountsThatWouldWrapAroundAreUserErrors) {
  MemoryPlan plan;
  plan.add("small", MemCategory::activations, Shape{4, 4});
  expect_mentions(user_error_of([&] { plan.add("logits", MemCategory::activations, Shape{std::int64_t{1} << 62, 8}); }),
                  {"activations", "overflow 64-bit byte counts", "logits", "(4611686018427387904, 8)"});
  plan.add("big", MemCategory::gradients, Shape{std::int64_t{1} << 61});  // 2^63 bytes: still addressable
  expect_mentions(user_error_of([&] { plan.add("bigger", MemCategory::gradients, Shape{std::int64_t{1} << 61}); }),
                  {"gradients", "bigger"});
  // Entries that were refused leave the plan as it was.
  EXPECT_EQ(plan.entries().size(), 2u);
  EXPECT_EQ(plan.bytes(MemCategory::activations), 64u);
  EXPECT_EQ(plan.bytes(MemCategory::gradients), std::size_t{1} << 63);
}

TEST(MemoryFit, StateThatCannotFitIsRefusedWithItsNumbers) {
  const Recipe r = recipe({"model.n_layers=40", "model.d_model=4096", "model.n_heads=32", "model.n_kv_heads=8",
                           "model.ffn_hidden=11008", "model.vocab_size=32000"});
  EXPECT_NO_THROW(check_state_fits(r, 0, 1, "this host"));  // unknown memory: nothing to check
  EXPECT_NO_THROW(check_state_fits(r, std::size_t{1} << 50, 1, "this host"));
  expect_mentions(user_error_of([&] { check_state_fits(r, std::size_t{8} << 30, 1, "this host"); }),
                  {"does not fit", "40 layers, d_model 4096, ffn_hidden 11008, vocabulary 32000",
                   "parameters x 16 bytes", "this host has 8.00 GiB available", "parallel.tp"});
  // Four processes on one host each need as much.
  const std::size_t one = static_cast<std::size_t>(model_size(r).state_bytes_per_rank) + 1;
  EXPECT_NO_THROW(check_state_fits(r, one, 1, "this host"));
  expect_mentions(user_error_of([&] { check_state_fits(r, one, 4, "this host"); }), {"x 4 processes on this host"});
}

TEST(MemoryFit, APlanThatCannotFitIsRefusedBeforeAllocation) {
  MemoryPlan plan;
  plan.add("weights", MemCategory::parameters, Shape{1024});
  plan.add("acts", MemCategory::activations, Shape{4096});
  EXPECT_NO_THROW(check_plan_fits(plan, plan.total_bytes(), 1, "GPU 0", MemoryCheck::refuse));
  expect_mentions(user_error_of([&] { check_plan_fits(plan, plan.total_bytes() - 1, 1, "GPU 0", MemoryCheck::refuse); }),
                  {"the memory plan needs 20.0 KiB per process", "parameters 4.0 KiB", "activations 16.0 KiB",
                   "GPU 0 has", "train.micro_batch", "--dry-run"});
  expect_mentions(user_error_of([&] { check_plan_fits(plan, plan.total_bytes() * 2, 3, "this host", MemoryCheck::refuse); }),
                  {"x 3 processes on this host = 60.0 KiB"});
}

TEST(MemoryFit, AModelInstanceTooLargeForItsMemoryIsAUserError) {
  const Recipe r = recipe({"train.micro_batch=4", "train.global_batch=4"});
  ModelPlacement placement;
  placement.memory = MemoryShare{4096, 1};  // far less than the plan
  const ModelGeometry whole = ModelGeometry::of(r.model, {}, 16);
  expect_mentions(user_error_of([&] { ModelInstance instance(r, whole, 4, Recompute::none, placement); }),
                  {"has 4.0 KiB available"});
  placement.memory = MemoryShare{std::size_t{1} << 40, 1};
  EXPECT_NO_THROW(ModelInstance(r, whole, 4, Recompute::none, placement));
}

// device.memory_check = "warn": the user knows more memory is free than reported; every check
// says what it found and lets the run go on. The refusal names the key.
TEST(MemoryFit, WarnInsteadOfRefusingWhenTheRecipeSaysSo) {
  const Recipe big = recipe({"model.n_layers=40", "model.d_model=4096", "model.n_heads=32", "model.n_kv_heads=8",
                             "model.ffn_hidden=11008", "model.vocab_size=32000"});
  expect_mentions(user_error_of([&] { check_state_fits(big, std::size_t{8} << 30, 1, "this host"); }),
                  {"device.memory_check = \"warn\""});
  expect_mentions(user_error_of([&] { check_host_fits(recipe(), 4096, 1, false); }), {"device.memory_check"});
  const Recipe warned = recipe({"device.memory_check=warn"});
  EXPECT_EQ(memory_check_of(warned), MemoryCheck::warn);
  EXPECT_NO_THROW(check_host_fits(warned, 4096, 1, false));
  Recipe big_warned = big;
  big_warned.device.memory_check = "warn";
  EXPECT_NO_THROW(check_state_fits(big_warned, std::size_t{8} << 30, 1, "this host"));
  MemoryPlan plan;
  plan.add("acts", MemCategory::activations, Shape{4096});
  EXPECT_NO_THROW(check_plan_fits(plan, 1, 1, "this host", MemoryCheck::warn));
  ModelPlacement placement;
  placement.memory = MemoryShare{4096, 1};
  EXPECT_NO_THROW(ModelInstance(warned, ModelGeometry::of(warned.model, {}, 16), 2, Recompute::none, placement));
  expect_mentions(user_error_of([&] { parse_recipe("[data]\npath = \"d\"\n", "m.toml", {"device.memory_check=maybe"}); }),
                  {"device.memory_check", "refuse", "warn"});
}

TEST(MemoryFit, OnlyTheHostIsShared) {
  EXPECT_EQ(memory_share(Device::cpu, 1000, 4).available, 1000u);
  EXPECT_EQ(memory_share(Device::cpu, 1000, 4).sharers, 4);
  EXPECT_EQ(memory_share(Device::cuda, 1000, 4).available, 0u);  // asked of the GPU when the model is made
  EXPECT_EQ(memory_share(Device::cuda, 1000, 4).sharers, 1);
}

}  // namespace
}  // namespace ustrain
