// Data parallelism at the model level: each rank runs forward/backward on its share of a
// global batch with the bucketed reducer armed; the reduced gradients must equal the
// gradients of the whole batch computed on one rank (to float32 reassociation).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/gradient_reducer.h"
#include "core/model/llama.h"
#include "core/rng.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

constexpr std::int64_t kSeq = 6, kPerRank = 2;

ModelSection tiny_model() {
  ModelSection m;
  m.vocab_size = 13;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn_hidden = 24;
  m.max_seq_len = kSeq;
  m.init_std = 0.2;
  return m;
}

struct Replica {
  std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
  LlamaModel model;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;
  explicit Replica(std::int64_t batch) : model(tiny_model(), batch, kSeq, Recompute::none) {
    model.plan(plan);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    model.bind(*memory, *backend);
    model.initialise(*backend, 99);  // the same seed on every rank: identical replicas
  }
  std::vector<float> grads() const {
    const Tensor g = model.params().all_grads();
    return std::vector<float>(g.f32(), g.f32() + g.numel());
  }
};

TEST(DataParallel, BucketedReductionEqualsTheWholeBatch) {
  auto group = mpi_test::world().everyone();
  const int ranks = group->size(), rank = group->rank();
  const std::int64_t global = kPerRank * ranks;
  std::vector<std::int32_t> ids, targets;
  Rng rng(5);
  for (std::int64_t i = 0; i < global * kSeq; ++i) {
    ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 13));
    targets.push_back(static_cast<std::int32_t>(rng.next_u64() % 13));
  }
  const float dloss = 1.0f / static_cast<float>(global * kSeq);

  Replica whole(global);
  whole.model.forward(*whole.backend, ids.data(), targets.data(), global, kSeq);
  whole.model.backward(*whole.backend, dloss);
  const std::vector<float> expected = whole.grads();

  // Two micro-batches of gradient accumulation; only the second one reduces.
  Replica shard(1);
  GradientReducer reducer(shard.model.params(), *group, /*bucket_bytes=*/2048);
  ASSERT_GT(reducer.bucket_count(), 2u);
  shard.model.set_grad_ready_hook([&](int p) { reducer.on_grad_ready(p); });
  for (std::int64_t micro = 0; micro < kPerRank; ++micro) {
    const std::int64_t row = rank * kPerRank + micro;
    if (micro == kPerRank - 1) reducer.begin();
    shard.model.forward(*shard.backend, ids.data() + row * kSeq, targets.data() + row * kSeq, 1, kSeq);
    shard.model.backward(*shard.backend, dloss);
  }
  reducer.finish();
  const std::vector<float> got = shard.grads();

  ASSERT_EQ(got.size(), expected.size());
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - expected[i]) * static_cast<double>(got[i] - expected[i]);
    norm += expected[i] * static_cast<double>(expected[i]);
  }
  ASSERT_GT(norm, 0.0);
  EXPECT_LT(std::sqrt(err / norm), 1e-5) << "on rank " << rank << " of " << ranks;
}

}  // namespace
}  // namespace ustrain
