// One Muon step over the stores of a small layer: the matrices Muon takes follow its formula
// (an expert that received no tokens only decays), the rest AdamW's, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/distributed/muon_optimizer.h"
#include "tests/unit/kernels/reference.h"
#include "parallel/comm/self_communicator.h"

namespace ustrain {
std::vector<double> newton_schulz_float64(std::vector<double> x, std::int64_t rows, std::int64_t cols, int steps);
namespace {

constexpr float kLr = 0.02f;

struct Layer {
  CpuBackend cpu{1};
  ModelParams params;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;
  int embed, q, o, norm, router, busy_expert, idle_expert;

  Layer() {
    ParamRegistry& r = params.registry();
    embed = r.declare({"model.embed_tokens.weight", Shape{20, 8}, true, false, 0.02, UnitId::embedding()});
    q = r.declare({"model.layers.0.self_attn.q_proj.weight", Shape{6, 8}, true, false, 0.02, UnitId::layer(0)});
    o = r.declare({"model.layers.0.self_attn.o_proj.weight", Shape{8, 6}, true, false, 0.02, UnitId::layer(0)});
    norm = r.declare({"model.layers.0.input_layernorm.weight", Shape{8}, false, false, 0.0, UnitId::layer(0)});
    router = r.declare({"model.layers.0.mlp.gate.weight", Shape{2, 8}, true, false, 0.02, UnitId::layer(0)});
    busy_expert = r.declare({"model.layers.0.mlp.experts.0.up_proj.weight", Shape{10, 8}, true, false, 0.02,
                             UnitId::experts(0), SyncGroup::experts});
    idle_expert = r.declare({"model.layers.0.mlp.experts.1.up_proj.weight", Shape{10, 8}, true, false, 0.02,
                             UnitId::experts(0), SyncGroup::experts});
    params.plan(plan);
    plan_muon(params, plan);
    memory = std::make_unique<PlannedMemory>(plan, cpu);
    params.bind(*memory);
    params.initialise(cpu, 3);
  }
  std::vector<float> value(int h) const { return copy_of(params[h].value); }
  std::vector<float> grad(int h) const { return copy_of(params[h].grad); }
  static std::vector<float> copy_of(const Tensor& t) { return {t.f32(), t.f32() + t.numel()}; }
};

TEST(MuonStep, MatricesFollowTheFormulaAndTheRestTakeAdamW) {
  Layer layer;
  for (std::size_t h = 0; h < layer.params.specs().size(); ++h) {
    const Tensor g = layer.params[static_cast<int>(h)].grad;
    const std::vector<float> r = test::random_floats(static_cast<std::size_t>(g.numel()), static_cast<std::uint32_t>(h + 1));
    std::copy(r.begin(), r.end(), g.f32());
  }
  layer.cpu.fill(layer.params[layer.idle_expert].grad, 0.0f);  // no tokens reached it
  std::vector<std::vector<float>> before, grads;
  for (std::size_t h = 0; h < layer.params.specs().size(); ++h) {
    before.push_back(layer.value(static_cast<int>(h)));
    grads.push_back(layer.grad(static_cast<int>(h)));
  }
  OptimSection o;
  o.name = "muon";
  Muon muon(o, layer.cpu, layer.params, *layer.memory);
  SelfCommunicator self(0, "self");
  for (const auto& store : layer.params.stores()) muon.update(*store, self, OptimizerStep{kLr, 1, 1.0f});

  const auto mu = o.muon_momentum, wd = o.weight_decay;
  for (int h : {layer.q, layer.o, layer.busy_expert, layer.idle_expert}) {
    const ParamSpec& s = layer.params.spec(h);
    SCOPED_TRACE(s.name);
    std::vector<double> u = test::to_double(grads[static_cast<std::size_t>(h)]);
    for (double& v : u) v *= 1 + mu;  // the first step: M = G, U = G + mu M
    const std::vector<double> x = newton_schulz_float64(u, s.shape[0], s.shape[1], 5);
    const double scale = 0.2 * std::sqrt(static_cast<double>(std::max(s.shape[0], s.shape[1])));
    const std::vector<float> got = layer.value(h);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double w0 = before[static_cast<std::size_t>(h)][i];
      ASSERT_NEAR(got[i], w0 - kLr * (scale * x[i] + wd * w0), 1e-6) << "element " << i;
    }
  }
  for (int h : {layer.embed, layer.norm, layer.router}) {
    const ParamSpec& s = layer.params.spec(h);
    std::vector<float> p = before[static_cast<std::size_t>(h)], g = grads[static_cast<std::size_t>(h)];
    std::vector<float> m(p.size(), 0.0f), v(p.size(), 0.0f);
    const auto n = static_cast<std::int64_t>(p.size());
    layer.cpu.adamw(Tensor(p.data(), Shape{n}), Tensor(g.data(), Shape{n}), Tensor(m.data(), Shape{n}),
                    Tensor(v.data(), Shape{n}),
                    AdamWParams{kLr, static_cast<float>(o.beta1), static_cast<float>(o.beta2), static_cast<float>(o.eps),
                                s.decay ? static_cast<float>(wd) : 0.0f, 1, 1.0f});
    EXPECT_EQ(layer.value(h), p) << s.name;
  }
}

TEST(MuonStep, PlansItsMemoryPerStore) {
  Layer layer;
  std::vector<std::string> names;
  for (const PlanEntry& e : layer.plan.entries()) names.push_back(e.name);
  for (const char* want : {"muon.gathered", "muon.workspace", "experts.muon.gathered", "experts.muon.workspace"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

}  // namespace
}  // namespace ustrain
