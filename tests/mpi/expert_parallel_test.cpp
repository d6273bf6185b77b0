// Expert parallelism at the model level on 2 and 4 ranks: every rank reads different sequences
// (as the dp x cp ranks an ep group borrows do), each MoE layer's experts are split over ep
// ranks and its rows dispatched to them (parallel/expert_dispatch.h). After the gradients are
// summed over their groups (dense parameters over every rank, experts over the expert-gradient
// group), the loss, every parameter's gradient and the gradient norm equal one rank that ran
// all the sequences: at ep = 2 and, on 4 ranks, at ep = 4 (where each expert-gradient group is
// one rank), with a dispatch capacity that fits and with one a quarter of a rank's rows (extra
// rounds). A gradient scaled by ep, the classic expert-parallel bug, fails here even though
// AdamW would hide it from the losses. On 4 ranks also ep 2 with tp 2 (sequence parallelism
// on): each tp rank dispatches its share of the rows, every rank's box of every parameter's
// gradient equals the same box of the one rank's, and the tp group together puts on the ep
// wire what each of its ranks did when every tp rank dispatched every row.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/distributed/gradient_sync.h"
#include "core/model/llama.h"
#include "parallel/expert_dispatch.h"
#include "parallel/process_groups.h"
#include "parallel/tensor_parallel.h"
#include "tests/mpi/mpi_test_world.h"
#include "tests/mpi/tiny_model.h"
#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using mpi_test::TinyModel;
using mpi_test::world;

// The tiny model with 4 routed experts of width 8 (top-2), a shared expert and the z-loss.
ModelSection moe_model() {
  ModelSection m = mpi_test::tiny_model_config(false);
  m.n_experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn_hidden = 8;
  m.n_shared_experts = 1;
  m.shared_expert_ffn_hidden = 8;
  m.router_z_loss = 0.001;
  return m;
}

std::vector<int> ranks_where(int size, const auto& keep) {
  std::vector<int> ranks;
  for (int j = 0; j < size; ++j)
    if (keep(j)) ranks.push_back(j);
  return ranks;
}

double sum_of_squares(Backend& be, const ModelParams& params) {
  double s = 0;
  for (const auto& store : params.stores()) s += be.sum_of_squares(store->all_grads());
  return s;
}

constexpr std::uint64_t kSeed = 5;
constexpr std::int64_t kBatch = 2, kSeq = 6;

TEST(ExpertParallelModel, EveryGradientEqualsOneRank) {
  const int p = world().size(), r = world().rank();
  ProcessGroup everyone("world", world().everyone());
  const ModelSection cfg = moe_model();
  // Every rank's sequences, and the one rank that runs them all.
  const std::vector<std::int32_t> ids = test::random_ids(p * kBatch * kSeq, 13, 31);
  const std::vector<std::int32_t> targets = test::random_ids(p * kBatch * kSeq, 13, 32);
  const float dloss = 1.0f / static_cast<float>(p * kBatch * kSeq);
  TinyModel whole(cfg, p * kBatch, kSeq, Recompute::none, {}, kSeed);
  const double want = whole.model.forward(*whole.backend, {ids, targets}, p * kBatch, kSeq);
  whole.model.backward(*whole.backend, dloss);
  std::map<std::string, int> whole_handle;
  for (std::size_t i = 0; i < whole.model.params().specs().size(); ++i)
    whole_handle[whole.model.params().specs()[i].name] = static_cast<int>(i);

  for (int ep : {2, 4}) {
    if (p % ep != 0) continue;
    // The mesh's groups at dp = p: ep blocks of consecutive ranks, expert gradients over the
    // ranks at the same place in every block (parallel/mesh.h).
    auto ep_comm = world().communicator(ranks_where(p, [&](int j) { return j / ep == r / ep; }), "ep");
    ProcessGroup expert_grads("expert_gradients",
                              world().communicator(ranks_where(p, [&](int j) { return j % ep == r % ep; }),
                                                   "expert_gradients"));
    ExpertDispatcher dispatcher(*ep_comm, *ep_comm, static_cast<int>(cfg.n_experts));
    for (double capacity : {2.0, 0.25}) {
      SCOPED_TRACE(testing::Message() << "ep " << ep << ", capacity factor " << capacity);
      const ModelGeometry geometry =
          ModelGeometry::of(cfg, ModelSplit{1, 0, false, 1, 0, 1, 1, 0, ep, r % ep, capacity}, kSeq);
      const ParamShardings sharding{ParamSharding{p, r, 0}, ParamSharding{p / ep, expert_grads.rank(), 0}};
      TensorParallel no_tp;
      RingAttention no_cp;
      TinyModel split(cfg, geometry, kBatch, Recompute::none,
                      {.parallel = LayerParallel{no_tp, no_cp, dispatcher}, .sharding = sharding}, kSeed);
      const std::size_t mine = static_cast<std::size_t>(r * kBatch * kSeq);
      const double got = split.model.forward(*split.backend,
          mpi_test::slice_of(ids, targets, static_cast<std::int64_t>(mine), kBatch * kSeq), kBatch, kSeq);
      split.model.backward(*split.backend, dloss);
      EXPECT_NEAR(everyone.sum(got), want, 1e-5 * std::abs(want));
      const ModelParams& params = split.model.params();
      world().everyone()->all_reduce(params.dense().all_grads()).wait();  // data parallelism's sum
      expert_grads.host().all_reduce(params.store(SyncGroup::experts)->all_grads()).wait();
      EXPECT_EQ(static_cast<std::int64_t>(std::as_const(split.model).moe_loads().size()), cfg.n_layers);
      if (capacity < 1) {
        std::int64_t extra = 0;
        for (const MoeLoad* l : std::as_const(split.model).moe_loads()) extra += l->extra_rounds;
        EXPECT_GT(extra, 0) << "a quarter of the rows per round takes extra rounds";
      }

      int experts_held = 0;
      for (std::size_t i = 0; i < params.specs().size(); ++i) {
        const ParamSpec& s = params.specs()[i];
        experts_held += s.sync == SyncGroup::experts ? 1 : 0;
        ASSERT_TRUE(whole_handle.contains(s.name)) << s.name;
        const Tensor g = params[static_cast<int>(i)].grad, w = whole.model.params()[whole_handle[s.name]].grad;
        ASSERT_EQ(g.numel(), w.numel()) << s.name;
        double diff = 0, norm = 0;
        for (std::int64_t e = 0; e < g.numel(); ++e) {
          diff += (g.f32()[e] - w.f32()[e]) * (g.f32()[e] - w.f32()[e]);
          norm += static_cast<double>(w.f32()[e]) * w.f32()[e];
        }
        EXPECT_LT(std::sqrt(diff / std::max(norm, 1e-30)), 1e-5) << s.name << " on rank " << r;
      }
      // Each layer's block of experts: gate, up and down of E / ep experts.
      EXPECT_EQ(experts_held, static_cast<int>(cfg.n_layers * 3 * cfg.n_experts / ep));
      // The norm counts every expert once: its owners' chunks over the expert-gradient group.
      const double norm = grad_sum_of_squares(params, *split.backend, everyone);
      EXPECT_NEAR(norm, sum_of_squares(*whole.backend, whole.model.params()), 1e-5 * norm);
    }
  }
}

// The relative distance of this rank's box of a gradient from the same box of the whole one
// (padding rows of a vocabulary split compare against zero).
double box_distance(const ParamSpec& s, const Tensor& g, const Tensor& whole) {
  const std::int64_t cols = s.local.rank() == 2 ? s.local[1] : s.local[0];
  const std::int64_t global_cols = s.shape.rank() == 2 ? s.shape[1] : s.shape[0];
  double diff = 0, norm = 0;
  for (std::int64_t e = 0; e < s.local.numel(); ++e) {
    const std::int64_t row = s.local.rank() == 2 ? e / cols : 0, col = s.local.rank() == 2 ? e % cols : e;
    const bool padding = s.local.rank() == 2 && row >= s.box[0];
    const std::int64_t at = s.local.rank() == 2 ? (s.box_begin[0] + row) * global_cols + s.box_begin[1] + col
                                                : s.box_begin[0] + col;
    const double expected = padding ? 0.0 : whole.f32()[at];
    diff += (g.f32()[e] - expected) * (g.f32()[e] - expected);
    norm += expected * expected;
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

TEST(ExpertParallelModel, WithTensorParallelEveryGradientEqualsOneRank) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  constexpr int kTp = 2, kEp = 2, kDp = 2;
  const int r = world().rank(), t = r % kTp, d = r / kTp;  // the mesh's order: tp innermost
  const ModelSection cfg = moe_model();
  const std::vector<std::int32_t> ids = test::random_ids(kDp * kBatch * kSeq, 13, 41);
  const std::vector<std::int32_t> targets = test::random_ids(kDp * kBatch * kSeq, 13, 42);
  const float dloss = 1.0f / static_cast<float>(kDp * kBatch * kSeq);
  TinyModel whole(cfg, kDp * kBatch, kSeq, Recompute::none, {}, kSeed);
  const double want = whole.model.forward(*whole.backend, {ids, targets}, kDp * kBatch, kSeq);
  whole.model.backward(*whole.backend, dloss);
  std::map<std::string, int> whole_handle;
  for (std::size_t i = 0; i < whole.model.params().specs().size(); ++i)
    whole_handle[whole.model.params().specs()[i].name] = static_cast<int>(i);

  // dp = 2 = ep: the dp group is the ep group, each expert-gradient group one rank.
  ProcessGroup tp_group("tp", world().communicator(ranks_where(4, [&](int j) { return j / kTp == d; }), "tp"));
  ProcessGroup dp_group("dp", world().communicator(ranks_where(4, [&](int j) { return j % kTp == t; }), "dp"));
  std::map<double, std::int64_t> every_row_wire;  // per capacity: each tp rank dispatching every row
  for (bool share : {false, true})
  for (double capacity : {2.0, 0.25}) {
    SCOPED_TRACE(testing::Message() << "ep 2 x tp 2, capacity factor " << capacity << (share ? ", shared" : ""));
    // Without the tp group the dispatcher sends every row from every tp rank (full results
    // from partial ones: the same sums).
    ExpertDispatcher dispatcher = share ? ExpertDispatcher(dp_group.host(), dp_group.host(), tp_group.host(),
                                                           static_cast<int>(cfg.n_experts))
                                        : ExpertDispatcher(dp_group.host(), dp_group.host(),
                                                           static_cast<int>(cfg.n_experts));
    const ModelGeometry geometry =
        ModelGeometry::of(cfg, ModelSplit{kTp, t, true, 1, 0, 1, 1, 0, kEp, d, capacity}, kSeq);
    TensorParallel tp(tp_group.host(), true, VocabShard{geometry.vocab_begin, geometry.vocab_valid});
    const ParamShardings sharding{ParamSharding{kDp, d, 0}, ParamSharding{1, 0, 0}};
    RingAttention no_cp;
    TinyModel split(cfg, geometry, kBatch, Recompute::none,
                    {.parallel = LayerParallel{tp, no_cp, dispatcher}, .sharding = sharding}, kSeed);
    const std::size_t mine = static_cast<std::size_t>(d * kBatch * kSeq);
    dp_group.host().reset_volume();
    const double got = split.model.forward(*split.backend,
          mpi_test::slice_of(ids, targets, static_cast<std::int64_t>(mine), kBatch * kSeq), kBatch, kSeq);
    split.model.backward(*split.backend, dloss);
    const std::int64_t wire = dp_group.host().volume().all_to_all.wire_bytes;
    EXPECT_GT(wire, 0);
    if (!share) every_row_wire[capacity] = wire;
    else EXPECT_EQ(static_cast<std::int64_t>(tp_group.sum(static_cast<double>(wire))), every_row_wire[capacity]);
    EXPECT_NEAR(dp_group.sum(got), want, 1e-5 * std::abs(want));
    const ModelParams& params = split.model.params();
    dp_group.host().all_reduce(params.dense().all_grads()).wait();  // data parallelism's sum
    sum_partial_grads(params, tp_group);
    if (capacity < 1) {
      std::int64_t extra = 0;
      for (const MoeLoad* l : std::as_const(split.model).moe_loads()) extra += l->extra_rounds;
      EXPECT_GT(extra, 0) << "a quarter of the rows per round takes extra rounds";
    }
    for (std::size_t i = 0; i < params.specs().size(); ++i) {
      const ParamSpec& s = params.specs()[i];
      ASSERT_TRUE(whole_handle.contains(s.name)) << s.name;
      EXPECT_LT(box_distance(s, params[static_cast<int>(i)].grad, whole.model.params()[whole_handle[s.name]].grad),
                1e-5)
          << s.name << " on rank " << r;
    }
  }
}

}  // namespace
}  // namespace ustrain
