// Ranks that would share a GPU are found from the GPUs' UUIDs, whatever each process calls
// its GPU: the decision between NCCL and the host-staged communicator (core/train/gpu_sharing.h).
// All ranks run on this one host, so only the UUIDs tell them apart.
#include <gtest/gtest.h>

#include <string>

#include "core/train/gpu_sharing.h"
#include "parallel/mesh.h"
#include "parallel/process_groups.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

using mpi_test::world;

ProcessGroup world_group() { return ProcessGroup("world", world().everyone()); }

TEST(GpuSharing, DistinctGpusAreNotShared) {
  ProcessGroup g = world_group();
  EXPECT_FALSE(ranks_share_a_gpu(g, "gpu-" + std::to_string(g.rank())));
}

TEST(GpuSharing, TwoRanksOnOneGpuAreSharedOnEveryRank) {
  ProcessGroup g = world_group();
  // The last two ranks name the same GPU; every rank must learn it (a collective decision).
  const int last = g.size() - 1;
  const int gpu = g.rank() == last ? last - 1 : g.rank();
  EXPECT_TRUE(ranks_share_a_gpu(g, "gpu-" + std::to_string(gpu)));
}

TEST(GpuSharing, OneRankAloneNeverShares) {
  ProcessGroup g("self", world().communicator({world().rank()}, "self"));
  EXPECT_FALSE(ranks_share_a_gpu(g, "gpu-0"));
}

}  // namespace
}  // namespace ustrain
