// Communicator semantics that need no second process: shard layouts, names and messages,
// Work handles, and the single-process World with its groups of one.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/world.h"

namespace ustrain {
namespace {

TEST(ShardLayout, PadsTheTailSoEveryShardHasTheSameLength) {
  const ShardLayout l(10, 4);  // shards of 3: [0,3) [3,6) [6,9) [9,12), the last with 2 padding
  EXPECT_EQ(l.shard, 3);
  EXPECT_EQ(l.padded, 12);
  EXPECT_EQ(l.begin(3), 9);
  EXPECT_EQ(l.real_in(0), 3);
  EXPECT_EQ(l.real_in(3), 1);
  const ShardLayout tiny(2, 4);  // more parts than elements: the last two shards are all padding
  EXPECT_EQ(tiny.shard, 1);
  EXPECT_EQ(tiny.real_in(1), 1);
  EXPECT_EQ(tiny.real_in(2), 0);
  EXPECT_EQ(tiny.real_in(3), 0);
  const ShardLayout even(12, 3);
  EXPECT_EQ(even.padded, 12);
  EXPECT_EQ(even.real_in(2), 4);
}

TEST(CommunicatorNames, NameTheGroupAndAbbreviateLongOnes) {
  EXPECT_EQ(describe_group("dp", {0, 1, 2, 3}), "dp group (ranks 0,1,2,3)");
  EXPECT_EQ(describe_group("tp", {5}), "tp group (rank 5)");
  std::vector<int> many(64);
  std::iota(many.begin(), many.end(), 0);
  EXPECT_EQ(describe_group("dp", many), "dp group (ranks 0,1,2,3,4,5,...,63 (64 ranks))");
}

TEST(CommunicatorNames, TimeoutMessageNamesGroupOperationRankAndRemedy) {
  const std::string m = timeout_message("collective all_reduce of 10 f32 (sum)", "dp group (ranks 0,1,2,3)", 2,
                                        std::chrono::milliseconds(5000));
  EXPECT_EQ(m.rfind("collective all_reduce of 10 f32 (sum) on dp group (ranks 0,1,2,3) did not complete within 5 s "
                    "on rank 2: a peer may have died or be stuck.",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("raise the communication timeout"), std::string::npos) << m;
  EXPECT_EQ(describe_duration(std::chrono::milliseconds(250)), "0.25 s");
}

TEST(Work, DefaultIsCompleteAndFailedThrowsCommError) {
  Work done;
  EXPECT_TRUE(done.test());
  EXPECT_NO_THROW(done.wait());
  Work bad = Work::failed("boom");
  EXPECT_THROW(bad.wait(), CommError);
  EXPECT_THROW(bad.test(), CommError);
  std::vector<Work> works{Work(), Work::failed("second")};
  try {
    wait_all(works);
    FAIL() << "wait_all ignored a failure";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(), "second");
  }
}

TEST(SingleProcessWorld, NeedsNoMpiAndMakesGroupsOfOne) {
  World world(ProcessInfo{});
  EXPECT_FALSE(world.uses_mpi());
  int initialized = 1;
  MPI_Initialized(&initialized);
  EXPECT_EQ(initialized, 0);
  const Mesh mesh(MeshShape{}, 0, 1);
  auto dp = world.group(mesh, {MeshDim::dp, MeshDim::cp});
  EXPECT_EQ(dp->size(), 1);
  EXPECT_EQ(dp->rank(), 0);
  EXPECT_EQ(dp->name(), "dp+cp group (rank 0)");
  EXPECT_EQ(world.everyone()->name(), "world group (rank 0)");
  EXPECT_FALSE(world.failed());
}

TEST(SingleProcessWorld, GroupOfOneOperationsAreIdentitiesAndCopies) {
  World world(ProcessInfo{});
  auto c = world.everyone();
  std::vector<float> x = {1.5f, -2.0f, 3.25f};
  c->all_reduce(Tensor(x.data(), Shape{3}), ReduceOp::avg).wait();
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f, 3.25f}));

  std::vector<float> full = {4, 5, 6}, shard(3, 0.0f);
  c->reduce_scatter(Tensor(shard.data(), Shape{3}), Tensor(full.data(), Shape{3})).wait();
  EXPECT_EQ(shard, full);
  std::vector<float> gathered(3, 0.0f);
  c->all_gather(Tensor(gathered.data(), Shape{3}), Tensor(shard.data(), Shape{3})).wait();
  EXPECT_EQ(gathered, full);
  // In place: the shard is the whole buffer.
  EXPECT_NO_THROW(c->all_gather(Tensor(full.data(), Shape{3}), Tensor(full.data(), Shape{3})).wait());

  std::vector<std::int32_t> in = {7, 8, 9}, out(4, -1);
  const std::vector<std::int64_t> counts = {2};
  c->all_to_all_v(Tensor(out.data(), Shape{4}, DType::i32), counts, Tensor(in.data(), Shape{3}, DType::i32), counts)
      .wait();
  EXPECT_EQ(out, (std::vector<std::int32_t>{7, 8, -1, -1}));
  EXPECT_NO_THROW(c->broadcast(Tensor(in.data(), Shape{3}, DType::i32), 0).wait());
  EXPECT_NO_THROW(c->barrier().wait());
}

TEST(SingleProcessWorld, MisuseIsAnAssertionNamingTheGroup) {
  World world(ProcessInfo{});
  auto c = world.everyone();
  std::vector<float> a(4), b(3);
  std::vector<std::int32_t> i(4);
  // A full buffer that is not size() shards.
  EXPECT_THROW(c->reduce_scatter(Tensor(b.data(), Shape{3}), Tensor(a.data(), Shape{4})), std::logic_error);
  // avg of integers, and a dtype the backends do not reduce.
  EXPECT_THROW(c->all_reduce(Tensor(i.data(), Shape{4}, DType::i32), ReduceOp::avg), std::logic_error);
  EXPECT_THROW(c->all_reduce(Tensor(i.data(), Shape{4}, DType::u32)), std::logic_error);
  // A device tensor on a host communicator, a root outside the group, a peer in a group of one.
  EXPECT_THROW(c->all_reduce(Tensor(a.data(), Shape{4}, DType::f32, Device::cuda)), std::logic_error);
  EXPECT_THROW(c->broadcast(Tensor(a.data(), Shape{4}), 1), std::logic_error);
  EXPECT_THROW(c->send(Tensor(a.data(), Shape{4}), 0), std::logic_error);
  // A shard that overlaps the full buffer without being this rank's shard of it.
  EXPECT_THROW(c->all_gather(Tensor(a.data(), Shape{4}), Tensor(a.data() + 1, Shape{4})), std::logic_error);
  try {
    c->broadcast(Tensor(a.data(), Shape{4}), 3);
    FAIL() << "a root outside the group was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast on world group (rank 0): root 3 is not a member index"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ustrain
