// The expert dispatcher (parallel/expert_dispatch.h) on 2, 3, 4 and 6 ranks against a
// reference that sees every rank's rows and runs every expert itself; on 4 and 6 ranks also
// under tensor parallelism (ep x tp ranks, each tp rank holding a column shard of every expert),
// where the tp group's outputs sum to the reference's.
//
// Each expert is a linear map out = in W_e^T with (D, D) weights. Every rank builds every
// rank's rows and routing from the seed (what gathering them would give), so the reference of
// its own outputs, input gradients and owned experts' weight gradients needs no communication.
// Values are multiples of 1/8 in [-1, 1], so every product and sum is exact in fp32 whatever
// the order of rows, rounds or GEMM blocking: results are compared for equality.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "parallel/expert_dispatch.h"
#include "parallel/comm/self_communicator.h"
#include "tests/mpi/expert_dispatch_support.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

using mpi_test::world;

using namespace dispatch_test;  // the rows, experts and references of these tests

// Runs forward and backward over `comm` and checks them against the reference.
void check_dispatch(Communicator& comm, Routing routing, std::int64_t capacity, std::uint64_t seed) {
  CpuBackend be(1);
  const int members = comm.size(), me = comm.rank();
  std::vector<Rows> all;
  for (int m = 0; m < members; ++m) all.push_back(rows_of(m, members, routing, seed));
  const Rows& mine = all[static_cast<std::size_t>(me)];
  const std::int64_t n = mine.n();
  Buffers buffers(std::max<std::int64_t>(n, 1), capacity);
  const DispatchBuffers planned = buffers.tensors(std::max<std::int64_t>(n, 1), capacity);
  ExpertDispatcher dispatcher(comm, comm, kExperts);
  const std::vector<float> w = weights(seed);
  LinearExperts experts(w, dispatcher.placement());

  std::vector<float> x = mine.x, d_out = mine.d_out, out(x.size(), -99.0f), d_in(x.size(), -99.0f);
  const Tensor tx(x.data(), Shape{n, kWidth}), tout(out.data(), Shape{n, kWidth});
  const Tensor tdo(d_out.data(), Shape{n, kWidth}), tdi(d_in.data(), Shape{n, kWidth});
  comm.reset_volume();
  int alongside_calls = 0;  // the caller's overlapped work runs once per pass, whatever the rounds
  const auto alongside = [&] { ++alongside_calls; };
  const DispatchStats fwd = dispatcher.forward(be, experts, mine.counts, tx, tout, planned, alongside);
  EXPECT_EQ(alongside_calls, 1);
  const std::int64_t forward_wire = comm.volume().all_to_all.wire_bytes;
  const DispatchStats bwd = dispatcher.backward(be, experts, mine.counts, tx, tdo, tdi, planned, alongside);
  EXPECT_EQ(alongside_calls, 2);
  const std::int64_t backward_wire = comm.volume().all_to_all.wire_bytes - forward_wire;

  // Outputs and input gradients of this member's rows.
  expect_reference_results(mine, w, out, d_in);
  // Weight gradients: every member's rows of an owned expert, nothing for the others.
  EXPECT_EQ(experts.grads(),
            owned_weight_grads(all, dispatcher.placement(), w.size(), [](std::int64_t) { return true; }));

  // Rounds: the most rows any member receives, over the capacity.
  const ExpertPlacement& pl = dispatcher.placement();
  std::int64_t most = 0, sent = 0, received = 0;
  for (int d = 0; d < members; ++d) {
    std::int64_t into = 0;
    for (int s = 0; s < members; ++s)
      for (int e = d * pl.per_member(); e < (d + 1) * pl.per_member(); ++e) {
        const std::int64_t c = all[static_cast<std::size_t>(s)].counts[static_cast<std::size_t>(e)];
        into += c;
        if (s == me && d != me) sent += c;
        if (d == me && s != me) received += c;
      }
    most = std::max(most, into);
  }
  const int rounds = members == 1 ? 0 : static_cast<int>((most + capacity - 1) / capacity);
  EXPECT_EQ(fwd.rounds, rounds);
  EXPECT_EQ(bwd.rounds, rounds);
  EXPECT_EQ(fwd.extra_rounds, std::max(0, rounds - 1));
  EXPECT_EQ(fwd.rows_sent, members == 1 ? 0 : sent);
  EXPECT_EQ(fwd.rows_received, members == 1 ? 0 : received);
  EXPECT_EQ(bwd.rows_sent, fwd.rows_sent);
  // On the wire: rows out and results back; backward rows and their gradients out, input
  // gradients back. The counts travel by all-gather, not counted here.
  const std::int64_t row_bytes = kWidth * 4;
  EXPECT_EQ(forward_wire, (sent + received) * row_bytes * (members > 1));
  EXPECT_EQ(backward_wire, (2 * sent + received) * row_bytes * (members > 1));
}

struct Case {
  Routing routing;
  std::int64_t capacity;
};

// Under tensor parallelism: `ep` holds this rank's ep group, `tp` its tp group (whose members
// route the same rows). Runs forward and backward and checks that the tp group's results sum
// to the reference's, that each rank's experts got their columns' weight gradients, and that
// the tp group together put on the ep wire what one rank puts there at tp = 1.
void check_dispatch_tp(Communicator& ep, Communicator& tp, Routing routing, std::int64_t capacity,
                       std::uint64_t seed) {
  CpuBackend be(1);
  const int members = ep.size(), me = ep.rank();
  std::vector<Rows> all;
  for (int m = 0; m < members; ++m) all.push_back(rows_of(m, members, routing, seed));
  const Rows& mine = all[static_cast<std::size_t>(me)];
  const std::int64_t n = mine.n(), send_rows = std::max<std::int64_t>(n, 1);
  Buffers buffers(send_rows, capacity, ExpertDispatcher::gathered_rows(capacity, members, tp.size()));
  const DispatchBuffers planned = buffers.tensors(send_rows, capacity);
  ExpertDispatcher dispatcher(ep, ep, tp, kExperts);
  const std::vector<float> w = weights(seed);
  ShardedLinearExperts experts(w, dispatcher.placement(), tp.size(), tp.rank());

  std::vector<float> x = mine.x, d_out = mine.d_out, out(x.size(), -99.0f), d_in(x.size(), -99.0f);
  const Tensor tx(x.data(), Shape{n, kWidth}), tout(out.data(), Shape{n, kWidth});
  const Tensor tdo(d_out.data(), Shape{n, kWidth}), tdi(d_in.data(), Shape{n, kWidth});
  ep.reset_volume();
  tp.reset_volume();
  int alongside_calls = 0;
  const auto alongside = [&] { ++alongside_calls; };
  const DispatchStats fwd = dispatcher.forward(be, experts, mine.counts, tx, tout, planned, alongside);
  const std::int64_t forward_wire = ep.volume().all_to_all.wire_bytes;
  const DispatchStats bwd = dispatcher.backward(be, experts, mine.counts, tx, tdo, tdi, planned, alongside);
  EXPECT_EQ(alongside_calls, 2);
  const std::int64_t backward_wire = ep.volume().all_to_all.wire_bytes - forward_wire;
  const CommVolume tp_volume = tp.volume();

  // Rows to other members' experts: full on one tp rank, zero on the others.
  const ExpertPlacement& pl = dispatcher.placement();
  std::vector<float> to_others(static_cast<std::size_t>(n), 0.0f);  // 1: this rank holds the row's full result
  for (std::int64_t i = 0; i < n; ++i)
    if (!pl.owns(mine.expert[static_cast<std::size_t>(i)])) to_others[static_cast<std::size_t>(i)] = !zero_row(out, i);
  // The tp group's sums.
  tp.all_reduce(tout).wait();
  tp.all_reduce(tdi).wait();
  expect_reference_results(mine, w, out, d_in);
  // Each row to another member came back full to one tp rank (a row whose result is zero
  // counts on none: the reference says which).
  tp.all_reduce(Tensor(to_others.data(), Shape{n})).wait();
  for (std::int64_t i = 0; i < n; ++i)
    if (!pl.owns(mine.expert[static_cast<std::size_t>(i)]))
      EXPECT_EQ(to_others[static_cast<std::size_t>(i)], zero_row(out, i) ? 0.0f : 1.0f) << "row " << i;
  // Weight gradients: every member's rows of an owned expert, in this rank's columns.
  EXPECT_EQ(experts.grads(),
            owned_weight_grads(all, pl, w.size(), [&](std::int64_t column) { return experts.holds(column); }));

  // Rounds as at tp = 1; rows and wire bytes: the tp group together moves what one rank did.
  std::int64_t most = 0, sent = 0, received = 0;
  for (int d = 0; d < members; ++d) {
    std::int64_t into = 0;
    for (int s = 0; s < members; ++s) into += routed(all, pl, s, d);
    most = std::max(most, into);
    if (d != me) sent += routed(all, pl, me, d), received += routed(all, pl, d, me);
  }
  const int rounds = static_cast<int>((most + capacity - 1) / capacity);
  EXPECT_EQ(fwd.rounds, rounds);
  EXPECT_EQ(bwd.rounds, rounds);
  EXPECT_EQ(fwd.extra_rounds, std::max(0, rounds - 1));
  std::vector<float> per_rank{static_cast<float>(fwd.rows_sent), static_cast<float>(fwd.rows_received),
                              static_cast<float>(forward_wire), static_cast<float>(backward_wire)};
  tp.all_reduce(Tensor(per_rank.data(), Shape{4})).wait();
  const std::int64_t row_bytes = kWidth * 4;
  EXPECT_EQ(per_rank[0], static_cast<float>(sent));
  EXPECT_EQ(per_rank[1], static_cast<float>(received));
  EXPECT_EQ(per_rank[2], static_cast<float>((sent + received) * row_bytes));
  EXPECT_EQ(per_rank[3], static_cast<float>((2 * sent + received) * row_bytes));
  // Each rank's share: at most its ceil(1/tp) of every piece of every round.
  const std::int64_t slack = static_cast<std::int64_t>(rounds) * (members - 1);
  EXPECT_LE(fwd.rows_sent, sent / tp.size() + slack);
  EXPECT_LE(fwd.rows_received, received / tp.size() + slack);
  EXPECT_EQ(bwd.rows_sent, fwd.rows_sent);
  // The tp exchanges: per round with received rows, one all-gather and one reduce-scatter
  // forward, two all-gathers and one reduce-scatter backward.
  EXPECT_EQ(tp_volume.all_gather.calls, 3 * tp_volume.reduce_scatter.calls / 2);
  EXPECT_LE(tp_volume.reduce_scatter.calls, 2 * rounds);
  if (received > 0) {
    EXPECT_GT(tp_volume.reduce_scatter.calls, 0);
  }
}

const Case kCases[] = {
    {Routing::spread, 1000},        {Routing::spread, 7},          {Routing::spread, 1},
    {Routing::some_empty, 1000},    {Routing::some_empty, 5},      {Routing::one_member, 1000},
    {Routing::one_member, 4},       {Routing::silent_member, 1000}, {Routing::silent_member, 3},
    {Routing::silent, 2},
};

TEST(ExpertDispatch, EveryRankAgainstTheReference) {
  auto comm = world().everyone();
  std::uint64_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "routing " << static_cast<int>(c.routing) << " capacity " << c.capacity);
    check_dispatch(*comm, c.routing, c.capacity, seed++);
  }
}

TEST(ExpertDispatch, PairsOfRanks) {  // ep groups of two inside a larger world
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const int r = world().rank();
  auto comm = world().communicator(r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, "ep");
  std::uint64_t seed = 100;
  for (const Case& c : kCases) check_dispatch(*comm, c.routing, c.capacity, seed++);
}

// Ranks r = m tp + t: ep member m, tp rank t (the mesh's order: tp innermost).
void check_tp_layout(int tp_size) {
  const int r = world().rank(), size = world().size(), ep_size = size / tp_size;
  std::vector<int> ep_ranks, tp_ranks;
  for (int m = 0; m < ep_size; ++m) ep_ranks.push_back(m * tp_size + r % tp_size);
  for (int t = 0; t < tp_size; ++t) tp_ranks.push_back(r / tp_size * tp_size + t);
  auto ep = world().communicator(ep_ranks, "ep");
  auto tp = world().communicator(tp_ranks, "tp");
  std::uint64_t seed = 300;
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "ep " << ep_size << " tp " << tp_size << " routing "
                                    << static_cast<int>(c.routing) << " capacity " << c.capacity);
    check_dispatch_tp(*ep, *tp, c.routing, c.capacity, seed++);
  }
}

TEST(ExpertDispatch, TensorParallelTwo) {  // ep 2 x tp 2, ep 3 x tp 2
  if (world().size() != 4 && world().size() != 6) GTEST_SKIP() << "needs 4 or 6 ranks";
  check_tp_layout(2);
}

TEST(ExpertDispatch, TensorParallelThree) {  // ep 2 x tp 3: sub-pieces of unequal sizes
  if (world().size() != 6) GTEST_SKIP() << "needs 6 ranks";
  check_tp_layout(3);
}

TEST(ExpertDispatch, OneMemberStaysLocal) {
  SelfCommunicator self(world().rank(), "ep");
  for (const Case& c : kCases) {
    check_dispatch(self, c.routing, c.capacity, 200);
    EXPECT_EQ(self.volume().total().calls, 0) << "a group of one moves nothing";
  }
}

}  // namespace
}  // namespace ustrain
