// Two stores of parameters with different sync groups, on 4 ranks: dense parameters whose
// gradients add up over every rank, and "expert" parameters of which each rank holds one of
// two experts (rank % 2), reduced over the two ranks that hold the same expert ({0, 2} and
// {1, 3}: a stand-in for the expert-gradient group). For every ZeRO stage each store must
// reduce over its own group only, shard over its own group's size, take the AdamW step a
// single process would take, and checkpoint and load back whatever the other store does. In
// bf16 the fp32 masters are sharded from stage 1 on and the model must see them rounded to
// bf16 after the step and after a load (the engine gathers the 16-bit copy).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint/reader.h"
#include "core/checkpoint/writer.h"
#include "core/distributed/adamw_optimizer.h"
#include "core/distributed/param_engines.h"
#include "core/model/params.h"
#include "parallel/process_groups.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

constexpr int kRanks = 4, kExperts = 2;
constexpr std::int64_t kD = 24, kExpertRows = 8;

// This rank's parameters: two dense layers and one layer's experts (this rank's expert only).
struct Params {
  std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
  ModelParams params;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;

  Params(int rank, const ParamShardings& sharding, DType compute = DType::f32) {
    ParamRegistry& reg = params.registry();
    for (int l = 0; l < 2; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      reg.declare({p + "weight", Shape{kD, kD}, true, false, 0.1, UnitId::layer(l)});
      reg.declare({p + "gain", Shape{kD}, false, false, 0.0, UnitId::layer(l)});
    }
    const int expert = rank % kExperts;
    const int w = reg.declare({"experts.weight", Shape{kExperts * kExpertRows, kD}, true, false, 0.1,
                               UnitId::experts(0), SyncGroup::experts});
    const int g = reg.declare({"experts.gain", Shape{kExperts, kD}, false, false, 0.0, UnitId::experts(0),
                               SyncGroup::experts});
    // One expert's rows: the same box on the ranks that share the expert, owned by both (each
    // saves its chunk of it; ZeRO's chunks split it between them).
    reg.place(w, TpLayout::replicated, Shape{kExpertRows, kD}, {expert * kExpertRows, 0}, Shape{kExpertRows, kD},
              false, true);
    reg.place(g, TpLayout::replicated, Shape{1, kD}, {expert, 0}, Shape{1, kD}, false, true);
    params.plan(plan, sharding, compute);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    params.bind(*memory);
    params.initialise(*backend, 3);
  }
};

// The gradient rank `rank` contributes to element `e` (global flat index) of parameter `name`.
float grad_of(int rank, const std::string& name, std::int64_t e) {
  return 1e-3f * static_cast<float>((rank + 1) * ((e % 17) + 1)) * (name[0] == 'e' ? -1.0f : 1.0f);
}

std::int64_t global_index(const ParamSpec& s, std::int64_t local) {
  const std::int64_t cols = s.shape.rank() == 2 ? s.shape[1] : 1;
  if (s.shape.rank() == 1) return s.box_begin[0] + local;
  return (s.box_begin[0] + local / cols) * cols + local % cols;
}

// Every unit's backward, in the same order on every rank: each rank writes its gradients.
void backward(Params& p, ParamUseHooks& hooks, int rank) {
  for (UnitId unit : {UnitId::experts(0), UnitId::layer(1), UnitId::layer(0)}) {
    hooks.acquire(unit, true);
    for (std::size_t i = 0; i < p.params.specs().size(); ++i) {
      const ParamSpec& s = p.params.specs()[i];
      if (s.unit != unit) continue;
      const Tensor grad = p.params[static_cast<int>(i)].grad;
      for (std::int64_t e = 0; e < grad.numel(); ++e) grad.f32()[e] = grad_of(rank, s.name, global_index(s, e));
    }
    hooks.release(unit);
    hooks.grads_done(unit);
  }
}

// The summed gradient of an element: over every rank (dense), or the ranks holding its expert.
float summed_grad(int rank, const ParamSpec& s, std::int64_t e) {
  float sum = 0;
  for (int r = 0; r < kRanks; ++r)
    if (s.sync == SyncGroup::dense || r % kExperts == rank % kExperts) sum += grad_of(r, s.name, global_index(s, e));
  return sum;
}

// Every piece of `state` that `params` holds against the same elements of `reference`, which
// holds whole parameters. The group sums run in another order than the reference's: 1e-6.
void expect_matches(const ModelParams& params, const ModelParams& reference, ParamState state) {
  std::int64_t compared = 0;
  const std::vector<ParamPiece> whole = reference.held(state);
  for (const ParamPiece& piece : state == ParamState::value ? params.held(state) : params.owned(state))
    for (const ParamPiece& ref : whole)
      if (ref.param == piece.param) {
        for (std::int64_t e = piece.begin; e < piece.end; ++e, ++compared) {
          ASSERT_NEAR(piece.data.f32()[e - piece.begin], ref.data.f32()[e], 1e-6 + 1e-6 * std::abs(ref.data.f32()[e]))
              << params.spec(piece.param).name << " element " << e;
        }
      }
  EXPECT_GT(compared, 0);
}

// What the model computes with while each unit is acquired against the reference's (fp32)
// masters rounded to 16 bits: within bf16's rounding of values that agree to 1e-6.
void expect_compute_copy(ModelParams& params, ParamUseHooks& hooks, const ModelParams& reference, Backend& backend) {
  std::int64_t compared = 0;
  for (UnitId unit : {UnitId::layer(0), UnitId::layer(1), UnitId::experts(0)}) {
    hooks.acquire(unit, false);
    for (std::size_t i = 0; i < params.specs().size(); ++i) {
      if (params.specs()[i].unit != unit) continue;
      const Tensor view = params[static_cast<int>(i)].value, master = reference[static_cast<int>(i)].value;
      ASSERT_EQ(view.dtype, DType::bf16);
      std::vector<float> seen(static_cast<std::size_t>(view.numel()));
      backend.convert(Tensor(seen.data(), view.shape), view);
      for (std::int64_t e = 0; e < view.numel(); ++e, ++compared) {
        const float want = master.f32()[e];
        ASSERT_NEAR(seen[static_cast<std::size_t>(e)], want, 1e-6 + std::abs(want) / 256)
            << params.specs()[i].name << " element " << e;
      }
    }
    hooks.release(unit);
  }
  EXPECT_GT(compared, 0);
}

// One process's AdamW step on the summed gradients: the reference every layout must match.
void single_process_step(Params& single, int rank, const AdamWParams& adamw) {
  for (std::size_t i = 0; i < single.params.specs().size(); ++i) {
    const ParamSpec& s = single.params.spec(static_cast<int>(i));
    const Tensor grad = single.params[static_cast<int>(i)].grad;
    for (std::int64_t e = 0; e < grad.numel(); ++e) grad.f32()[e] = summed_grad(rank, s, e);
  }
  for (const auto& store : single.params.stores())
    for (const OptimizerSegment& seg : store->optimizer_segments()) {
      AdamWParams a = adamw;
      if (!seg.decay) a.weight_decay = 0;
      single.backend->adamw(seg.value, seg.grad, seg.m, seg.v, a);
    }
}

// Saves every rank's stores as step 1 under `root`, synchronously.
void save_step_one(Params& p, ProcessGroup& everyone, const std::string& root) {
  CheckpointWriterConfig c;
  c.root = root;
  c.async = false;
  c.recipe_toml = "[run]\nname = \"stores\"\n";
  c.ustrain_version = "0.0.test";
  c.backend = "cpu";
  c.mesh.dp = kRanks;
  c.group = &everyone.host();
  CheckpointWriter writer(c, SaveFaults());
  ASSERT_TRUE(writer.save(p.params, *p.backend, {1, 0, 0, 0, "", 1.0, {}}).has_value());
  writer.wait();
}

void check_stage(int zero, DType compute = DType::f32) {
  SCOPED_TRACE("ZeRO stage " + std::to_string(zero) + " in " + dtype_name(compute));
  const bool mixed = compute != DType::f32;
  World& world = mpi_test::world();
  ASSERT_EQ(world.size(), kRanks);
  const int rank = world.rank();
  ProcessGroup everyone("world", world.everyone());
  const std::vector<int> experts_group{rank % kExperts, rank % kExperts + kExperts};
  ProcessGroup experts("experts", world.communicator(experts_group, "experts"));
  const ParamShardings sharding{ParamSharding{kRanks, rank, zero}, ParamSharding{2, rank / kExperts, zero}};
  Params p(rank, sharding, compute);

  // Each store is laid out and sharded by its own group.
  ASSERT_EQ(p.params.stores().size(), 2u);
  const ParamStore& dense = p.params.dense();
  const ParamStore& expert = *p.params.store(SyncGroup::experts);
  EXPECT_EQ(dense.units().size(), 2u);
  EXPECT_EQ(expert.units().size(), 1u);
  EXPECT_EQ(dense.flat_size() % (kRanks * 64), 0);
  EXPECT_EQ(expert.flat_size() % (2 * 64), 0);
  EXPECT_EQ(expert.shard_size(), expert.flat_size() / 2);
  const std::string values_entry =
      zero >= 3 || (mixed && zero >= 1) ? "experts.parameters.shard" : "experts.parameters";
  std::int64_t planned = -1;
  for (const PlanEntry& e : p.plan.entries())
    if (e.name == values_entry) planned = e.shape.numel();
  EXPECT_EQ(planned, zero >= 3 || (mixed && zero >= 1) ? expert.flat_size() / 2 : expert.flat_size());

  // Gradients reduce over each store's own group.
  ParamEngines engines(p.params, *p.backend,
                       [&](SyncGroup g) -> Communicator& { return g == SyncGroup::dense ? everyone.host() : experts.host(); },
                       /*bucket_bytes=*/1024);
  engines.begin_step(1);
  backward(p, engines, rank);
  engines.finish_backward();
  std::int64_t checked = 0;
  for (const ParamPiece& piece : p.params.updated_grads()) {
    const ParamSpec& s = p.params.spec(piece.param);
    for (std::int64_t e = piece.begin; e < piece.end; ++e, ++checked)
      ASSERT_NEAR(piece.data.f32()[e - piece.begin], summed_grad(rank, s, e), 1e-6) << s.name << " element " << e;
  }
  EXPECT_GT(checked, 0);

  // One AdamW step equals a single process's on the summed gradients (the same init).
  const AdamWParams adamw{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
  OptimSection optim;  // the numbers of `adamw`
  optim.beta1 = adamw.beta1, optim.beta2 = adamw.beta2, optim.eps = adamw.eps, optim.weight_decay = adamw.weight_decay;
  AdamW optimizer(optim, *p.backend);
  engines.optimizer_step(optimizer, OptimizerStep{adamw.lr, adamw.step, adamw.grad_scale});
  Params single(rank, ParamShardings{});
  single_process_step(single, rank, adamw);
  expect_matches(p.params, single.params, ParamState::value);
  expect_matches(p.params, single.params, ParamState::adam_m);
  if (mixed) expect_compute_copy(p.params, engines, single.params, *p.backend);

  // A checkpoint saved by both stores loads into another sharding of each.
  const auto leader_pid = static_cast<long>(everyone.sum(rank == 0 ? static_cast<double>(getpid()) : 0.0));
  const std::string root = (std::filesystem::temp_directory_path() /
                            ("ustrain-param-stores-" + std::to_string(leader_pid) + "-" + std::to_string(zero)))
                               .string();
  save_step_one(p, everyone, root);
  // The mixed-precision reload keeps the expert store sharded: its copy is gathered too.
  const ParamSharding reloaded_experts = mixed ? ParamSharding{2, rank / kExperts, 1} : ParamSharding{};
  Params reloaded(rank, ParamShardings{ParamSharding{kRanks, rank, 3 - zero}, reloaded_experts}, compute);
  load_model_state(CheckpointReader(root + "/step-00000001"), reloaded.params, *reloaded.backend,
                   /*with_optimizer=*/true);
  expect_matches(reloaded.params, single.params, ParamState::value);
  expect_matches(reloaded.params, single.params, ParamState::adam_m);
  expect_matches(reloaded.params, single.params, ParamState::adam_v);
  if (mixed) {
    ParamEngines reloaded_engines(
        reloaded.params, *reloaded.backend,
        [&](SyncGroup g) -> Communicator& { return g == SyncGroup::dense ? everyone.host() : experts.host(); },
        /*bucket_bytes=*/1024);
    expect_compute_copy(reloaded.params, reloaded_engines, single.params, *reloaded.backend);
  }
  everyone.sum(0.0);  // every rank has read before the leader removes the directory
  if (rank == 0) std::filesystem::remove_all(root);
}

TEST(ParamStores, Stage0) { check_stage(0); }
TEST(ParamStores, Stage1) { check_stage(1); }
TEST(ParamStores, Stage2) { check_stage(2); }
TEST(ParamStores, Stage3) { check_stage(3); }
TEST(ParamStores, Stage1InBf16) { check_stage(1, DType::bf16); }
TEST(ParamStores, Stage2InBf16) { check_stage(2, DType::bf16); }
TEST(ParamStores, Stage3InBf16) { check_stage(3, DType::bf16); }

}  // namespace
}  // namespace ustrain
