// Data parallelism at the model level, for every ZeRO stage: each rank runs forward/backward
// on its share of a global batch (two micro-batches of accumulation) with the ZeRO engine
// attached; the gradients each rank keeps must equal those of the whole batch computed on one
// rank (to float32 reassociation), and one AdamW step must leave every rank's values equal to
// the one-rank step's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/model/llama.h"
#include "core/model/rng.h"
#include "core/distributed/gradient_sync.h"
#include "core/distributed/adamw_optimizer.h"
#include "core/distributed/param_engines.h"
#include "tests/mpi/mpi_test_world.h"
#include "tests/mpi/tiny_model.h"

namespace ustrain {
namespace {

using mpi_test::TinyModel;

constexpr std::int64_t kSeq = 6, kPerRank = 2;
constexpr std::uint64_t kSeed = 99;  // the same on every rank: identical replicas

ModelSection tiny_model(bool tied) {
  ModelSection m = mpi_test::tiny_model_config(tied);
  m.max_seq_len = kSeq;
  m.init_std = 0.2;
  return m;
}

std::vector<float> copy_of(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

double relative_error(const std::vector<float>& got, const std::vector<float>& expected) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - expected[i]) * static_cast<double>(got[i] - expected[i]);
    norm += expected[i] * static_cast<double>(expected[i]);
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

void check_stage(int zero, bool tied) {
  SCOPED_TRACE("ZeRO stage " + std::to_string(zero) + (tied ? ", tied embeddings" : ""));
  ProcessGroup world("world", mpi_test::world().everyone());
  Communicator* group = &world.host();
  const int ranks = group->size(), rank = group->rank();
  const std::int64_t global = kPerRank * ranks;
  std::vector<std::int32_t> ids, targets;
  Rng rng(5);
  for (std::int64_t i = 0; i < global * kSeq; ++i) {
    ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 13));
    targets.push_back(static_cast<std::int32_t>(rng.next_u64() % 13));
  }
  const float dloss = 1.0f / static_cast<float>(global * kSeq);
  const AdamWParams adamw{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};

  // The reference: the whole batch on one rank, laid out like the shards (same padding).
  TinyModel whole(tiny_model(tied), global, kSeq, Recompute::none, {.sharding = ParamSharding{ranks, rank, 0}}, kSeed);
  whole.model.forward(*whole.backend, {ids, targets}, global, kSeq);
  whole.model.backward(*whole.backend, dloss);
  const std::vector<float> expected_grads = copy_of(whole.model.params().dense().all_grads());
  for (const OptimizerSegment& s : whole.model.params().dense().optimizer_segments()) {
    AdamWParams p = adamw;
    if (!s.decay) p.weight_decay = 0;
    whole.backend->adamw(s.value, s.grad, s.m, s.v, p);
  }

  TinyModel shard(tiny_model(tied), 1, kSeq, Recompute::none, {.sharding = ParamSharding{ranks, rank, zero}}, kSeed);
  ParamEngines engine(shard.model.params(), *shard.backend, [&](SyncGroup) -> Communicator& { return *group; },
                      /*bucket_bytes=*/2048);
  shard.model.set_param_hooks(&engine);
  engine.begin_step(static_cast<int>(kPerRank));
  for (std::int64_t micro = 0; micro < kPerRank; ++micro) {
    const std::int64_t row = rank * kPerRank + micro;
    shard.model.forward(*shard.backend, mpi_test::slice_of(ids, targets, row * kSeq, kSeq), 1, kSeq);
    shard.model.backward(*shard.backend, dloss);
  }
  engine.finish_backward();

  // Each rank's chunk of every unit (stage 0: everything) against the reference.
  const ModelParams& params = shard.model.params();
  const ParamStore& store = params.dense();
  std::vector<float> got, expected;
  for (std::size_t u = 0; u < store.units().size(); ++u) {
    const ParamUnit& unit = store.units()[u];
    const std::int64_t c = zero == 0 ? unit.length : unit.length / ranks;
    const std::int64_t begin = unit.begin + (zero == 0 ? 0 : rank * c);
    const Tensor mine = zero == 0 ? store.unit_grads(static_cast<int>(u)) : store.grad_chunk(static_cast<int>(u));
    const std::vector<float> g = copy_of(mine);
    got.insert(got.end(), g.begin(), g.end());
    expected.insert(expected.end(), expected_grads.begin() + begin, expected_grads.begin() + begin + c);
  }
  EXPECT_LT(relative_error(got, expected), 1e-5) << "gradients on rank " << rank << " of " << ranks;
  EXPECT_NEAR(std::sqrt(grad_sum_of_squares(params, *shard.backend, world)),
              std::sqrt(whole.backend->sum_of_squares(whole.model.params().dense().all_grads())), 1e-5);

  OptimSection optim;  // the numbers of `adamw`
  optim.beta1 = adamw.beta1, optim.beta2 = adamw.beta2, optim.eps = adamw.eps, optim.weight_decay = adamw.weight_decay;
  AdamW optimizer(optim, *shard.backend);
  engine.optimizer_step(optimizer, OptimizerStep{adamw.lr, adamw.step, adamw.grad_scale});
  got.clear();
  expected.clear();
  for (const ParamPiece& piece : params.held(ParamState::value)) {
    const std::vector<float> v = copy_of(piece.data);
    got.insert(got.end(), v.begin(), v.end());
    const ParamViews& ref = whole.model.params()[piece.param];
    expected.insert(expected.end(), ref.value.f32() + piece.begin, ref.value.f32() + piece.end);
  }
  EXPECT_LT(relative_error(got, expected), 1e-6) << "values after the step on rank " << rank;
}

TEST(DataParallel, Stage0BucketedAllReduce) { check_stage(0, false); }
TEST(DataParallel, Stage1ShardedOptimizer) { check_stage(1, false); }
TEST(DataParallel, Stage2ShardedGradients) { check_stage(2, false); }
TEST(DataParallel, Stage3ShardedParameters) { check_stage(3, false); }
TEST(DataParallel, Stage3WithTiedEmbeddings) { check_stage(3, true); }
TEST(DataParallel, Stage2WithTiedEmbeddings) { check_stage(2, true); }

}  // namespace
}  // namespace ustrain
