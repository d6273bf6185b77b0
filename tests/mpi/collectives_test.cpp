// Every communicator operation on 2, 3 and 4 ranks against a serial reference; with
// USTRAIN_TEST_STAGED=1, the same operations through the host-staged communicator over the
// CPU backend (parallel/comm/staged_communicator.h).
//
// Inputs are drawn so that every partial sum is exact in the dtype (f32: multiples of 1/8
// below 2^10; bf16: multiples of 1/4 below 16; fp16: multiples of 1/16 below 32), so the
// reference is exact whatever order MPI reduces in, and results are compared for equality. Sizes are odd on purpose.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/mesh.h"
#include "parallel/process_groups.h"
#include "tests/mpi/collectives_support.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

using mpi_test::Buffer;
using mpi_test::everyone;
using mpi_test::input;
using mpi_test::reference_avg;
using mpi_test::reference_sum;
using mpi_test::world;

struct Case {
  DType dtype;
  ReduceOp op;
};
const Case kReduceCases[] = {{DType::f32, ReduceOp::sum}, {DType::f32, ReduceOp::avg}, {DType::bf16, ReduceOp::sum},
                             {DType::bf16, ReduceOp::avg}, {DType::f16, ReduceOp::sum},
                             {DType::f16, ReduceOp::avg}, {DType::i32, ReduceOp::sum}};
const std::int64_t kSizes[] = {1, 7, 1001, 65537};

std::string label(const Case& c, std::int64_t n) {
  return std::string(dtype_name(c.dtype)) + " " + reduce_op_name(c.op) + " n=" + std::to_string(n);
}

TEST(Collectives, AllReduceMatchesSerialReduction) {
  auto comm = everyone();
  const int p = comm->size();
  std::uint64_t seed = 1;
  for (const Case& c : kReduceCases)
    for (std::int64_t n : kSizes) {
      ++seed;
      Buffer b(c.dtype, n);
      b.fill_input(seed, comm->rank());
      comm->all_reduce(b.tensor(), c.op).wait();
      for (std::int64_t i = 0; i < n; ++i) {
        const double sum = reference_sum(c.dtype, seed, p, i);
        const double expected = c.op == ReduceOp::sum ? sum : reference_avg(c.dtype, sum, p);
        ASSERT_EQ(b.get(i), expected) << label(c, n) << " at " << i;
      }
    }
}

TEST(Collectives, LargeAllReduceMatchesSerialSum) {
  auto comm = everyone();
  const std::int64_t n = (1 << 20) + 3;  // beyond MPI's eager and segment sizes
  Buffer b(DType::f32, n);
  b.fill_input(99, comm->rank());
  comm->all_reduce(b.tensor()).wait();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(b.get(i), reference_sum(DType::f32, 99, comm->size(), i)) << i;
}

TEST(Collectives, ReduceScatterIntoSeparateAndInPlaceShards) {
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  std::uint64_t seed = 100;
  for (bool in_place : {false, true})
    for (const Case& c : kReduceCases)
      for (std::int64_t n : {std::int64_t{1}, std::int64_t{5}, std::int64_t{1001}, std::int64_t{65537}}) {
        ++seed;
        const ShardLayout layout(n, p);
        Buffer full(c.dtype, layout.padded);
        full.fill_input(seed, me);
        for (std::int64_t i = n; i < layout.padded; ++i) full.set(i, 0.0);  // padding stays zero
        Buffer separate(c.dtype, layout.shard);
        Tensor shard = in_place ? full.tensor().slice(layout.begin(me), layout.begin(me) + layout.shard)
                                : separate.tensor();
        comm->reduce_scatter(shard, full.tensor(), c.op).wait();
        const Buffer& out = in_place ? full : separate;
        const std::int64_t base = in_place ? layout.begin(me) : 0;
        for (std::int64_t k = 0; k < layout.shard; ++k) {
          const std::int64_t i = layout.begin(me) + k;
          const double sum = i < n ? reference_sum(c.dtype, seed, p, i) : 0.0;
          const double expected = c.op == ReduceOp::sum ? sum : reference_avg(c.dtype, sum, p);
          ASSERT_EQ(out.get(base + k), expected) << label(c, n) << (in_place ? " in place" : "") << " at " << i;
        }
      }
}

TEST(Collectives, AllGatherConcatenatesShardsInRankOrder) {
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  std::uint64_t seed = 200;
  for (bool in_place : {false, true})
    for (DType t : {DType::f32, DType::bf16, DType::i32})
      for (std::int64_t n : {std::int64_t{1}, std::int64_t{5}, std::int64_t{1001}, std::int64_t{65537}}) {
        ++seed;
        const ShardLayout layout(n, p);
        Buffer full(t, layout.padded), separate(t, layout.shard);
        for (std::int64_t i = 0; i < layout.padded; ++i) full.set(i, -1.0);
        Buffer& src = in_place ? full : separate;
        const std::int64_t base = in_place ? layout.begin(me) : 0;
        for (std::int64_t k = 0; k < layout.shard; ++k) src.set(base + k, input(t, seed, me, k));
        Tensor shard = in_place ? full.tensor().slice(layout.begin(me), layout.begin(me) + layout.shard)
                                : separate.tensor();
        comm->all_gather(full.tensor(), shard).wait();
        for (int r = 0; r < p; ++r)
          for (std::int64_t k = 0; k < layout.shard; ++k)
            ASSERT_EQ(full.get(layout.begin(r) + k), input(t, seed, r, k))
                << dtype_name(t) << " n=" << n << (in_place ? " in place" : "") << " shard " << r << " at " << k;
      }
}

TEST(Collectives, AllToAllExchangesChunks) {
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  for (DType t : {DType::f32, DType::bf16, DType::i32})
    for (std::int64_t chunk : {1, 3, 257}) {
      Buffer in(t, chunk * p), out(t, chunk * p);
      // Chunk j of rank r carries input(seed = 300 + j, r, k): the receiver knows what to expect.
      for (int j = 0; j < p; ++j)
        for (std::int64_t k = 0; k < chunk; ++k) in.set(j * chunk + k, input(t, 300 + static_cast<std::uint64_t>(j), me, k));
      comm->all_to_all(out.tensor(), in.tensor()).wait();
      for (int r = 0; r < p; ++r)
        for (std::int64_t k = 0; k < chunk; ++k)
          ASSERT_EQ(out.get(r * chunk + k), input(t, 300 + static_cast<std::uint64_t>(me), r, k))
              << dtype_name(t) << " chunk " << chunk << " from " << r;
    }
}

TEST(Collectives, AllToAllVExchangesUnevenChunks) {
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  // Rank s sends count(s, d) elements to rank d; some counts are zero.
  const auto count = [](int s, int d) { return std::int64_t{(s + 2 * d) % 3 + 2 * d}; };
  std::vector<std::int64_t> in_counts, out_counts;
  for (int j = 0; j < p; ++j) {
    in_counts.push_back(count(me, j));
    out_counts.push_back(count(j, me));
  }
  const auto total = [](const std::vector<std::int64_t>& v) { std::int64_t s = 0; for (auto x : v) s += x; return s; };
  for (DType t : {DType::f32, DType::bf16, DType::i32}) {
    Buffer in(t, total(in_counts)), out(t, total(out_counts) + 2);  // out has slack: counts need not fill it
    std::int64_t at = 0;
    for (int d = 0; d < p; ++d)
      for (std::int64_t k = 0; k < in_counts[static_cast<std::size_t>(d)]; ++k) in.set(at++, input(t, 400 + static_cast<std::uint64_t>(d), me, k));
    comm->all_to_all_v(out.tensor(), out_counts, in.tensor(), in_counts).wait();
    at = 0;
    for (int s = 0; s < p; ++s)
      for (std::int64_t k = 0; k < out_counts[static_cast<std::size_t>(s)]; ++k)
        ASSERT_EQ(out.get(at++), input(t, 400 + static_cast<std::uint64_t>(me), s, k)) << dtype_name(t) << " from " << s;
  }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  auto comm = everyone();
  for (DType t : {DType::f32, DType::bf16, DType::i32})
    for (int root = 0; root < comm->size(); ++root) {
      Buffer b(t, 1001);
      b.fill_input(500 + static_cast<std::uint64_t>(root), comm->rank());
      comm->broadcast(b.tensor(), root).wait();
      for (std::int64_t i = 0; i < b.size(); ++i)
        ASSERT_EQ(b.get(i), input(t, 500 + static_cast<std::uint64_t>(root), root, i)) << dtype_name(t) << " root " << root;
    }
}

TEST(Collectives, SendRecvAroundTheRingMatchesByTag) {
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  // Two messages per neighbour; the receives are posted in the opposite order of the sends,
  // so only the tags can pair them correctly.
  Buffer a(DType::f32, 1001), b(DType::f32, 7), got_a(DType::f32, 1001), got_b(DType::f32, 7);
  a.fill_input(600, me);
  b.fill_input(601, me);
  std::vector<Work> works;
  works.push_back(comm->recv(got_b.tensor(), prev, /*tag=*/2));
  works.push_back(comm->recv(got_a.tensor(), prev, /*tag=*/1));
  works.push_back(comm->send(a.tensor(), next, /*tag=*/1));
  works.push_back(comm->send(b.tensor(), next, /*tag=*/2));
  wait_all(works);
  for (std::int64_t i = 0; i < 1001; ++i) ASSERT_EQ(got_a.get(i), input(DType::f32, 600, prev, i));
  for (std::int64_t i = 0; i < 7; ++i) ASSERT_EQ(got_b.get(i), input(DType::f32, 601, prev, i));
}

TEST(Collectives, Float64SumsAreExactInDouble) {
  // Values whose sum float32 cannot hold: 2^40 + rank + 1/4.
  auto comm = everyone();
  const int p = comm->size();
  std::vector<double> v(5);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1099511627776.0 + comm->rank() + 0.25 * static_cast<double>(i);
  comm->all_reduce(Tensor(v.data(), Shape{5}, DType::f64)).wait();
  for (std::size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(v[i], p * 1099511627776.0 + p * (p - 1) / 2.0 + p * 0.25 * static_cast<double>(i)) << i;
  double mean = comm->rank();
  comm->all_reduce(Tensor(&mean, Shape{1}, DType::f64), ReduceOp::avg).wait();
  EXPECT_EQ(mean, (p - 1) / 2.0);
}

TEST(Collectives, ExchangeWithBothNeighboursSendingFirstDoesNotDeadlock) {
  // Every rank sends to both neighbours and receives from both, sends listed first: posted
  // one by one with blocking sends this order could deadlock; a batch cannot.
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  Buffer to_next(DType::f32, 100003), to_prev(DType::f32, 17), from_prev(DType::f32, 100003), from_next(DType::f32, 17);
  to_next.fill_input(650, me);
  to_prev.fill_input(651, me);
  const PeerTransfer batch[] = {{PeerTransfer::Kind::send, to_next.tensor(), next, 3},
                                {PeerTransfer::Kind::send, to_prev.tensor(), prev, 4},
                                {PeerTransfer::Kind::recv, from_prev.tensor(), prev, 3},
                                {PeerTransfer::Kind::recv, from_next.tensor(), next, 4}};
  std::vector<Work> works = comm->exchange(batch);
  ASSERT_EQ(works.size(), 4u);
  // Each transfer completes on its own: the receive from the previous rank first.
  works[2].wait();
  for (std::int64_t i = 0; i < 100003; ++i) ASSERT_EQ(from_prev.get(i), input(DType::f32, 650, prev, i));
  wait_all(works);
  for (std::int64_t i = 0; i < 100003; ++i) ASSERT_EQ(from_prev.get(i), input(DType::f32, 650, prev, i));
  for (std::int64_t i = 0; i < 17; ++i) ASSERT_EQ(from_next.get(i), input(DType::f32, 651, next, i));
  EXPECT_EQ(comm->volume().send, (OpVolume{2, (100003 + 17) * 4, (100003 + 17) * 4}));
  EXPECT_EQ(comm->volume().recv, (OpVolume{2, (100003 + 17) * 4, 0}));
}

TEST(Collectives, NamedGroupsFollowTheMesh) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks for a dp=2 x tp=2 mesh";
  const Mesh mesh(MeshShape{.dp = 2, .tp = 2}, world().rank(), 4);
  ProcessGroups groups(world(), mesh);
  EXPECT_EQ(groups.tp().host().ranks(), mesh.group({MeshDim::tp}));
  EXPECT_EQ(groups.dp().host().ranks(), mesh.group({MeshDim::dp}));
  EXPECT_EQ(groups.gradients().host().ranks(), mesh.group({MeshDim::dp, MeshDim::cp}));
  EXPECT_EQ(groups.ep().size(), 1);  // ep = 1: every rank holds every expert
  EXPECT_EQ(groups.expert_gradients().host().ranks(), mesh.group({MeshDim::dp, MeshDim::cp}));
  EXPECT_EQ(groups.loss().host().ranks(), mesh.group({MeshDim::pp, MeshDim::dp, MeshDim::cp}));
  EXPECT_EQ(groups.embedding(), nullptr);  // pp = 1
  EXPECT_EQ(groups.replica().host().ranks(), mesh.group({MeshDim::pp, MeshDim::tp}));
  EXPECT_EQ(groups.pp().size(), 1);
  EXPECT_EQ(groups.world().size(), 4);
  EXPECT_NE(groups.loss().host().name().find("loss group"), std::string::npos) << groups.loss().host().name();
  // Host scalars: float64 sums over each group's members only.
  const double big = 4503599627370496.0;  // 2^52: float32 would lose the ranks
  EXPECT_EQ(groups.loss().sum(big + world().rank()), 2 * big + mesh.group({MeshDim::dp})[0] + mesh.group({MeshDim::dp})[1]);
  EXPECT_EQ(groups.world().sum(1.0), 4.0);
  EXPECT_EQ(groups.tp().any(world().rank() == 3), mesh.coord(MeshDim::dp) == 1);  // rank 3 is (dp 1, tp 1)
  EXPECT_EQ(groups.dp().any(world().rank() == 3), mesh.coord(MeshDim::tp) == 1);
  // A group of one returns the value itself.
  EXPECT_EQ(groups.pp().sum(0.1), 0.1);
}

TEST(Collectives, BarrierHoldsEveryoneUntilTheLastArrives) {
  auto comm = everyone();
  using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: one clock for all ranks of a host
  const int last = comm->size() - 1;
  if (comm->rank() == last) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::int64_t arrival = Clock::now().time_since_epoch().count();
  comm->barrier().wait();
  const std::int64_t left = Clock::now().time_since_epoch().count();
  // Everyone learns when the late rank arrived and checks it did not leave before that.
  Tensor stamp(&arrival, Shape{2}, DType::i32);  // the 8 bytes as two i32: moved, not reduced
  comm->broadcast(stamp, last).wait();
  EXPECT_GE(left, arrival);
}

TEST(Collectives, AsyncOperationsOnTwoGroupsCompleteInAnyWaitOrder) {
  const Mesh mesh(MeshShape{.dp = world().size()}, world().rank(), world().size());
  auto dp = world().group(mesh, {MeshDim::dp});
  auto all = world().everyone();
  EXPECT_NE(dp->name().find("dp group (ranks 0,1"), std::string::npos) << dp->name();
  const int p = dp->size();
  std::vector<Buffer> buffers;
  for (int k = 0; k < 6; ++k) buffers.emplace_back(DType::f32, 4099 + 2 * k);
  std::vector<Work> works;
  for (int k = 0; k < 6; ++k) {
    buffers[static_cast<std::size_t>(k)].fill_input(700 + static_cast<std::uint64_t>(k), dp->rank());
    Communicator& c = (k % 2 == 0) ? *dp : *all;
    works.push_back(c.all_reduce(buffers[static_cast<std::size_t>(k)].tensor()));
  }
  for (int k = 5; k >= 0; --k) works[static_cast<std::size_t>(k)].wait();  // the reverse of issue order
  for (int k = 0; k < 6; ++k)
    for (std::int64_t i = 0; i < buffers[static_cast<std::size_t>(k)].size(); ++i)
      ASSERT_EQ(buffers[static_cast<std::size_t>(k)].get(i), reference_sum(DType::f32, 700 + static_cast<std::uint64_t>(k), p, i)) << k;
}

TEST(Collectives, MeshGroupsReduceOverTheirMembersOnly) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks for a dp=2 x tp=2 mesh";
  const Mesh mesh(MeshShape{.dp = 2, .tp = 2}, world().rank(), 4);
  auto tp = world().group(mesh, {MeshDim::tp});
  auto dp = world().group(mesh, {MeshDim::dp});
  auto pp = world().group(mesh, {MeshDim::pp});  // a group of one
  EXPECT_EQ(tp->ranks(), mesh.group({MeshDim::tp}));
  EXPECT_EQ(dp->ranks(), mesh.group({MeshDim::dp}));
  EXPECT_EQ(pp->size(), 1);
  for (Communicator* c : {tp.get(), dp.get(), pp.get()}) {
    std::int32_t v = world().rank() + 1;
    c->all_reduce(Tensor(&v, Shape{1}, DType::i32)).wait();
    std::int32_t expected = 0;
    for (int r : c->ranks()) expected += r + 1;
    EXPECT_EQ(v, expected) << c->name();
  }
}

}  // namespace
}  // namespace ustrain
