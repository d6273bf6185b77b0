// The checkpoint writer's host snapshot is part of the memory plan: the bytes the plan declares
// for it, before the model has memory, are exactly what the writer allocates once it has; the
// host memory checks count them, a GPU's do not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/checkpoint/writer.h"
#include "core/step/memory_fit.h"
#include "core/model/llama.h"
#include "core/recipe/recipe.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

ModelSection quickstart_model() {
  return load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/quickstart.toml", {}).model;
}

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

// One rank's model: planned with its snapshot, then given its memory.
struct SavingRank {
  std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
  LlamaModel model;
  MemoryPlan plan;
  std::uint64_t planned = 0;  // the snapshot's bytes, declared before any memory exists
  std::unique_ptr<PlannedMemory> memory;

  SavingRank(const ModelSection& cfg, ParamSharding sharding) : model(cfg, 1, 8, Recompute::none) {
    model.plan(plan, sharding);
    plan_checkpoint_snapshot(model.params(), plan);
    planned = plan.host_bytes(kCheckpointSnapshot);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    model.bind(*memory, *backend);
  }

  // What the writer allocates for this rank's state.
  std::uint64_t allocated() const {
    const std::string root = (std::filesystem::temp_directory_path() /
                              ("ustrain_snapshot_plan_" + std::to_string(::getpid())))
                                 .string();
    CheckpointWriterConfig config;
    config.root = root;
    CheckpointWriter writer(config, SaveFaults());
    writer.prepare(model.params(), *backend);
    const std::uint64_t bytes = writer.state_bytes();
    std::filesystem::remove_all(root);
    return bytes;
  }
};

TEST(CheckpointSnapshotPlan, QuickstartModelAtOneRankPlansWhatTheWriterAllocates) {
  SavingRank rank(quickstart_model(), ParamSharding{});
  const auto count = static_cast<std::uint64_t>(rank.model.params().count());
  EXPECT_EQ(rank.planned, 12 * count);  // value and two AdamW moments, fp32
  EXPECT_EQ(rank.allocated(), rank.planned);
  EXPECT_EQ(rank.plan.host_bytes(), rank.planned);
  EXPECT_NE(rank.plan.summary().find(kCheckpointSnapshot), std::string::npos);
}

TEST(CheckpointSnapshotPlan, ZeroShardsPlanWhatTheirWritersAllocate) {
  for (int zero : {1, 3})
    for (int dp : {2, 3}) {
      SCOPED_TRACE(testing::Message() << "dp " << dp << ", ZeRO stage " << zero);
      std::uint64_t all = 0, count = 0;
      for (int r = 0; r < dp; ++r) {
        SavingRank rank(small_model(), ParamSharding{dp, r, zero});
        EXPECT_EQ(rank.allocated(), rank.planned);
        EXPECT_LT(rank.planned, 12 * static_cast<std::uint64_t>(rank.model.params().count()));
        all += rank.planned;
        count = static_cast<std::uint64_t>(rank.model.params().count());
      }
      EXPECT_EQ(all, 12 * count);  // the ranks together save every element once
    }
}

TEST(CheckpointSnapshotPlan, HostMemoryChecksCountTheSnapshot) {
  LlamaModel model(small_model(), 1, 8, Recompute::none);
  MemoryPlan plan;
  model.plan(plan);
  const std::size_t arenas = plan.total_bytes();
  plan_checkpoint_snapshot(model.params(), plan);
  EXPECT_EQ(plan.total_bytes(), arenas);  // not an arena: its owner allocates it
  const std::size_t host = plan.host_bytes();
  ASSERT_GT(host, 0u);
  expect_mentions(user_error_of([&] { check_plan_fits(plan, arenas, 1, "this host", MemoryCheck::refuse); }),
                  {"checkpoint snapshot", format_bytes(host)});
  EXPECT_NO_THROW(check_plan_fits(plan, arenas + host, 1, "this host", MemoryCheck::refuse));
  EXPECT_NO_THROW(check_plan_fits(plan, arenas, 1, "GPU 0", MemoryCheck::refuse, 0, /*host_memory=*/false));
  // A GPU run checks its host buffers against the host on their own.
  expect_mentions(user_error_of([&] { check_host_buffers_fit(plan, host, 2, MemoryCheck::refuse, 0); }),
                  {"checkpoint snapshot", "x 2 processes"});
  EXPECT_NO_THROW(check_host_buffers_fit(plan, host, 1, MemoryCheck::refuse, 0));
}

}  // namespace
}  // namespace ustrain
