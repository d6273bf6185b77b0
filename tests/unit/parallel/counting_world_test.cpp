// Counting communicators and the groups of any rank on one process: operations complete at
// once, leave the data as it was and count like a real group of the same size; the named
// groups are the mesh's for the rank asked for. (That a whole training step counts what a real
// run does is tests/unit/core/plan/recorded_step_test.cpp.)
#include <gtest/gtest.h>

#include <vector>

#include "parallel/comm/counting_communicator.h"
#include "parallel/counting_world.h"

namespace ustrain {
namespace {

TEST(CountingCommunicator, CompletesAtOnceTouchesNothingAndCountsLikeARealGroup) {
  CountingCommunicator comm({3, 7, 11, 15}, 2, "dp");
  EXPECT_EQ(comm.name(), "dp group (ranks 3,7,11,15)");
  std::vector<float> full(12, 1.5f), shard(3, 2.5f);
  const Tensor full_t(full.data(), Shape{12}), shard_t(shard.data(), Shape{3});
  Work reduce = comm.all_reduce(full_t);
  EXPECT_TRUE(reduce.test());
  comm.reduce_scatter(shard_t, full_t).wait();
  comm.all_gather(full_t, shard_t).wait();
  const std::vector<PeerTransfer> transfers{{PeerTransfer::Kind::send, shard_t, 1, 5},
                                            {PeerTransfer::Kind::recv, shard_t, 3, 6}};
  std::vector<Work> works = comm.exchange(transfers);
  ASSERT_EQ(works.size(), 2u);
  wait_all(works);
  for (float x : full) EXPECT_EQ(x, 1.5f);
  for (float x : shard) EXPECT_EQ(x, 2.5f);

  const CommVolume& v = comm.volume();
  EXPECT_EQ(v.all_reduce.payload_bytes, 48);
  EXPECT_EQ(v.all_reduce.wire_bytes, wire_bytes(CommOp::all_reduce, 48, 4));
  EXPECT_EQ(v.reduce_scatter.payload_bytes, 48);
  EXPECT_EQ(v.all_gather.wire_bytes, wire_bytes(CommOp::all_gather, 48, 4));
  EXPECT_EQ(v.send.payload_bytes, 12);
  EXPECT_EQ(v.recv.payload_bytes, 12);
  EXPECT_EQ(v.playbook_bytes(), 2 * 48 + 48 + 48 + 12);
}

TEST(CountingCommunicator, RefusesWhatTheRealOnesRefuse) {
  CountingCommunicator comm({0, 1}, 0, "tp");
  std::vector<float> data(4);
  EXPECT_THROW(comm.send(Tensor(data.data(), Shape{4}), 2), std::exception);  // no member 2
  std::vector<float> full(5);
  EXPECT_THROW(comm.all_gather(Tensor(full.data(), Shape{5}), Tensor(data.data(), Shape{2})), std::exception);
  EXPECT_EQ(comm.volume().total().calls, 0);  // refused operations are not counted
}

TEST(CountingWorld, BuildsTheNamedGroupsOfAnyRank) {
  // pp = 2, dp = 2, tp = 2: rank 5 is pp 1, dp 0, tp 1.
  const Mesh mesh(MeshShape{.pp = 2, .dp = 2, .tp = 2}, 5, 8);
  const auto groups = counting_process_groups(mesh);
  EXPECT_EQ(groups->world().host().ranks(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(groups->tp().host().ranks(), (std::vector<int>{4, 5}));
  EXPECT_EQ(groups->tp().rank(), 1);
  EXPECT_EQ(groups->pp().host().ranks(), (std::vector<int>{1, 5}));
  EXPECT_EQ(groups->pp().rank(), 1);
  EXPECT_EQ(groups->dp().host().ranks(), (std::vector<int>{5, 7}));
  EXPECT_EQ(groups->gradients().host().ranks(), (std::vector<int>{5, 7}));
  EXPECT_EQ(groups->replica().host().ranks(), (std::vector<int>{0, 1, 4, 5}));
  ASSERT_NE(groups->embedding(), nullptr);  // the last stage holds the embedding's copy
  EXPECT_EQ(groups->embedding()->host().ranks(), (std::vector<int>{1, 5}));
  // A host scalar reduced over the group answers this rank's value.
  EXPECT_EQ(groups->loss().sum(2.5), 2.5);
  EXPECT_FALSE(groups->world().any(false));
  EXPECT_EQ(groups->world().host().volume().all_reduce.calls, 1);
}

TEST(CountingWorld, ContextParallelRanksShareGradientsAndLosses) {
  // dp = 2, cp = 2, tp = 2: rank 5 is dp 1, cp 0, tp 1. Its gradients are reduced (and ZeRO
  // shards) over dp x cp, its losses and token counts summed over pp x dp x cp.
  const Mesh mesh(MeshShape{.dp = 2, .cp = 2, .tp = 2}, 5, 8);
  const auto groups = counting_process_groups(mesh);
  EXPECT_EQ(groups->cp().host().ranks(), (std::vector<int>{5, 7}));
  EXPECT_EQ(groups->cp().rank(), 0);
  EXPECT_EQ(groups->dp().host().ranks(), (std::vector<int>{1, 5}));
  EXPECT_EQ(groups->gradients().host().ranks(), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(groups->loss().host().ranks(), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(groups->tp().host().ranks(), (std::vector<int>{4, 5}));
}

TEST(CountingWorld, GivesDeviceGroupsCountingDeviceCommunicators) {
  const Mesh mesh(MeshShape{.tp = 2}, 0, 2);
  const auto groups = counting_process_groups(mesh, Device::cuda);
  EXPECT_EQ(groups->tp().for_tensors(Device::cuda).device(), Device::cuda);
  EXPECT_EQ(groups->tp().for_tensors(Device::cpu).device(), Device::cpu);
  EXPECT_EQ(&groups->pp().for_tensors(Device::cuda), &groups->pp().host());  // a group of one has none
}

}  // namespace
}  // namespace ustrain
