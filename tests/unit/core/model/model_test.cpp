// The whole model: gradients of every parameter against finite differences, recompute
// policies against each other, and the memory plan's arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/model/llama.h"
#include "core/model/rng.h"

namespace ustrain {
namespace {

ModelSection tiny_model(bool tied) {
  ModelSection m;
  m.vocab_size = 11;
  m.d_model = 12;
  m.n_layers = 2;
  m.n_heads = 3;     // head_dim 4
  m.n_kv_heads = 1;  // grouped-query: three q heads share one kv head
  m.ffn_hidden = 10;
  m.max_seq_len = 5;
  m.tied_embeddings = tied;
  m.init_std = 0.3;  // large enough that every path carries a visible gradient
  return m;
}

// Layer 0 dense, layer 1 a mixture of 4 experts (top-2, width 6) with a shared expert of 4.
ModelSection tiny_moe(const std::string& score, bool renormalize) {
  ModelSection m = tiny_model(false);
  m.n_experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn_hidden = 6;
  m.n_shared_experts = 1;
  m.shared_expert_ffn_hidden = 4;
  m.first_dense_layers = 1;
  m.router_score = score;
  m.router_renormalize = renormalize;
  return m;
}

struct TinyRun {
  static constexpr std::int64_t B = 2, S = 5;
  std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
  LlamaModel model;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;
  std::vector<std::int32_t> ids, targets;

  TinyRun(bool tied, Recompute policy) : TinyRun(tiny_model(tied), policy) {}
  TinyRun(const ModelSection& cfg, Recompute policy) : model(cfg, B, S, policy) {
    model.plan(plan);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    model.bind(*memory, *backend);
    model.initialise(*backend, 42);
    Rng rng(7);
    for (std::int64_t i = 0; i < B * S; ++i) {
      ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 11));
      targets.push_back(static_cast<std::int32_t>(rng.next_u64() % 11));
    }
    targets[3] = -1;  // an ignored position must not contribute
  }
  double loss() { return model.forward(*backend, {ids, targets}, B, S); }
  void gradients() {
    backend->fill(model.params().dense().all_grads(), 0.0f);
    loss();
    model.backward(*backend, 1.0f);  // d(sum of losses)
  }
  // The sum of losses plus what the sequence-level balance loss adds at dL/d(each token's
  // loss) = 1: S x the sum over sequences of alpha sum_i f_i P_i (which backward computes).
  double loss_with_balance() {
    model.reset_moe_loads();
    gradients();
    double balance = 0;
    for (const MoeLoad* l : model.moe_loads()) balance += l->seq_aux_sum;
    return loss() + static_cast<double>(S) * balance;
  }
};

// For each parameter tensor, the directional derivative along a random direction (every
// element non-zero) from the analytic gradient must match a central difference of the loss.
void check_all_gradients(const ModelSection& cfg, double tolerance = 2e-3, bool balance = false) {
  TinyRun run(cfg, Recompute::none);
  run.gradients();
  const ModelParams& params = run.model.params();
  // Every directional derivative first: with the balance loss each shifted loss runs a
  // backward pass, which overwrites the gradients.
  const auto direction = [&](std::size_t i) {
    std::vector<float> dir(static_cast<std::size_t>(params[static_cast<int>(i)].value.numel()));
    fill_normal(dir.data(), dir.size(), 1000 + i, 1.0);
    return dir;
  };
  std::vector<double> analytics;
  for (std::size_t i = 0; i < params.specs().size(); ++i) {
    const std::vector<float> dir = direction(i);
    double analytic = 0;
    for (std::size_t j = 0; j < dir.size(); ++j)
      analytic += static_cast<double>(params[static_cast<int>(i)].grad.f32()[j]) * dir[j];
    analytics.push_back(analytic);
  }
  for (std::size_t i = 0; i < params.specs().size(); ++i) {
    const ParamViews& p = params[static_cast<int>(i)];
    const auto n = static_cast<std::size_t>(p.value.numel());
    const std::vector<float> dir = direction(i);
    const double analytic = analytics[i];
    const std::vector<float> saved(p.value.f32(), p.value.f32() + n);
    const double eps = 1e-3;
    const auto shifted_loss = [&](double sign) {
      for (std::size_t j = 0; j < n; ++j) p.value.f32()[j] = saved[j] + static_cast<float>(sign * eps * dir[j]);
      return balance ? run.loss_with_balance() : run.loss();
    };
    const double numeric = (shifted_loss(+1) - shifted_loss(-1)) / (2 * eps);
    std::copy(saved.begin(), saved.end(), p.value.f32());
    const double scale = std::max(1.0, std::abs(numeric));
    EXPECT_NEAR(analytic, numeric, tolerance * scale) << params.specs()[i].name;
    EXPECT_GT(std::abs(analytic), 1e-4) << params.specs()[i].name << " gets no gradient";
  }
}

TEST(Model, EveryParameterGradientMatchesFiniteDifferences) { check_all_gradients(tiny_model(false)); }
TEST(Model, TiedEmbeddingGradientMatchesFiniteDifferences) { check_all_gradients(tiny_model(true)); }
// The router, every expert and the shared expert (through the routing's choices, which a step
// of 1e-3 does not flip here). The gates curve more than the dense paths: a step of the
// embedding, which moves every token's router logits, leaves a difference of 2.0e-3 relative.
TEST(Model, MixtureOfExpertsGradientsMatchFiniteDifferences) {
  check_all_gradients(tiny_moe("softmax", true), 3e-3);
  check_all_gradients(tiny_moe("sigmoid", false), 3e-3);
  check_all_gradients(tiny_moe("sigmoid", true), 3e-3);
}

// The sequence-level balance loss's gradient through the router, on top of the rest (a large
// alpha, so that a wrong balance gradient shows above the tolerance).
TEST(Model, SequenceBalanceLossGradientsMatchFiniteDifferences) {
  for (const char* score : {"softmax", "sigmoid"}) {
    SCOPED_TRACE(score);
    ModelSection cfg = tiny_moe(score, true);
    cfg.router_seq_aux_loss = 2.0;
    check_all_gradients(cfg, 3e-3, /*balance=*/true);
  }
}

TEST(Model, MixtureOfExpertsCountsActiveParameters) {
  TinyRun run(tiny_moe("softmax", true), Recompute::none);
  // Layer 1's MLP: router 4*12, 4 experts of 3*6*12 (2 active), shared 3*4*12, instead of 3*10*12.
  const std::int64_t attention = 144 + 96 + 144, dense = 360, experts = 3 * 6 * 12, shared = 3 * 4 * 12;
  EXPECT_EQ(run.model.params().count(), 132 + 132 + 12 + 2 * (attention + 24) + dense + 48 + 4 * experts + shared);
  EXPECT_EQ(run.model.matmul_params(), 132 + 2 * attention + dense + 48 + 2 * experts + shared);
}

TEST(Model, RecomputePoliciesGiveIdenticalGradients) {
  for (const ModelSection& cfg : {tiny_model(false), tiny_moe("softmax", true)}) {
    TinyRun none(cfg, Recompute::none), selective(cfg, Recompute::selective), full(cfg, Recompute::full);
    none.gradients();
    selective.gradients();
    full.gradients();
    const Tensor g0 = none.model.params().dense().all_grads();
    for (TinyRun* other : {&selective, &full}) {
      const Tensor g = other->model.params().dense().all_grads();
      ASSERT_EQ(g.numel(), g0.numel());
      for (std::int64_t j = 0; j < g.numel(); ++j) ASSERT_EQ(g.f32()[j], g0.f32()[j]) << "element " << j;
    }
  }
}

TEST(Model, RecomputeShrinksActivationMemory) {
  TinyRun none(false, Recompute::none), selective(false, Recompute::selective), full(false, Recompute::full);
  const auto act = [](TinyRun& r) { return r.plan.bytes(MemCategory::activations); };
  EXPECT_LT(act(selective), act(none));
  EXPECT_LT(act(full), act(selective));
}

TEST(Model, PlanHoldsParametersGradientsAndTwoMoments) {
  TinyRun run(false, Recompute::none);
  const std::int64_t count = run.model.params().count();
  // 11*12 embed + 11*12 head + 12 norm + per layer (12*12 q + 2*4*12 kv + 12*12 o + 3*10*12 mlp + 2*12 norms)
  EXPECT_EQ(count, 132 + 132 + 12 + 2 * (144 + 96 + 144 + 360 + 24));
  const auto bytes = static_cast<std::size_t>(count) * 4;
  // Padding to the plan's alignment is at most one alignment unit per entry.
  const std::size_t slack = run.model.params().specs().size() * MemoryPlan::kAlignment;
  EXPECT_GE(run.plan.bytes(MemCategory::parameters), bytes);
  EXPECT_LE(run.plan.bytes(MemCategory::parameters), bytes + slack);
  EXPECT_EQ(run.plan.bytes(MemCategory::gradients), run.plan.bytes(MemCategory::parameters));
  // Both AdamW moments share the optimizer arena; one alignment gap may separate them.
  EXPECT_GE(run.plan.bytes(MemCategory::optimizer), 2 * run.plan.bytes(MemCategory::parameters));
  EXPECT_LE(run.plan.bytes(MemCategory::optimizer), 2 * run.plan.bytes(MemCategory::parameters) + MemoryPlan::kAlignment);
}

TEST(Model, FlopsFollowTheDocumentedConvention) {
  TinyRun run(false, Recompute::none);
  // Matrix-multiply parameters: everything but the embedding and the norm gains.
  const std::int64_t n = 132 + 2 * (144 + 96 + 144 + 360);
  EXPECT_EQ(run.model.matmul_params(), n);
  EXPECT_DOUBLE_EQ(run.model.flops_per_token(5), 6.0 * n + 6.0 * 2 * 12 * 5);
}

TEST(Model, ShorterSequencesMatchAPrefixOfTheFullOne) {
  // Causality end to end: the logits of the first three positions do not depend on later tokens.
  TinyRun run(false, Recompute::none);
  std::vector<std::int32_t> no_targets(run.ids.size(), -1);
  run.model.forward(*run.backend, {run.ids, no_targets}, 1, 5);
  const std::vector<float> full(run.model.logits().f32(), run.model.logits().f32() + 3 * 11);
  run.model.forward(*run.backend, {run.ids, no_targets}, 1, 3);
  for (int j = 0; j < 3 * 11; ++j) EXPECT_NEAR(run.model.logits().f32()[j], full[static_cast<std::size_t>(j)], 1e-5);
}

// A pipeline stage holds some layers yet lists the whole model (what its checkpoint manifest
// names), in the whole model's order and shapes, the parameter count included.
TEST(Model, APipelineStageListsTheWholeModel) {
  const ModelSection cfg = tiny_model(false);
  const std::vector<ParamDecl> whole = LlamaModel::declaration(cfg);
  for (int stage = 0; stage < 2; ++stage) {
    SCOPED_TRACE(testing::Message() << "stage " << stage);
    const LlamaModel part(cfg, ModelGeometry::of(cfg, ModelSplit{.pp = 2, .pp_rank = stage}, 5), 1, Recompute::none);
    EXPECT_LT(part.params().specs().size(), whole.size());
    const std::vector<ParamDecl> listed = part.params().whole_model();
    ASSERT_EQ(listed.size(), whole.size());
    std::int64_t count = 0;
    for (std::size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(listed[i].name, whole[i].name);
      EXPECT_EQ(listed[i].shape, whole[i].shape);
      count += whole[i].shape.numel();
    }
    EXPECT_EQ(part.params().count(), count);
  }
}

}  // namespace
}  // namespace ustrain
