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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "parallel/expert_dispatch.h"
#include "parallel/comm/self_communicator.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

using mpi_test::world;

constexpr int kExperts = 12;  // splits over 1, 2, 3, 4 and 6 ranks
constexpr std::int64_t kWidth = 7;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float eighth(std::uint64_t h) { return static_cast<float>(static_cast<std::int64_t>(h % 17) - 8) / 8.0f; }

// Where the rows go.
enum class Routing {
  spread,         // any expert
  some_empty,     // only every third expert: the others get no row anywhere
  one_member,     // only the first member's experts: everything goes to one rank
  silent_member,  // spread, but member 1 routes no row at all
  silent,         // no member routes a row: no round runs
};

// One member's rows in expert order, as the MoE layer hands them over.
struct Rows {
  std::vector<std::int64_t> counts;  // (E)
  std::vector<std::int32_t> expert;  // (n) the expert of each row
  std::vector<float> x, d_out;       // (n, D)
  std::int64_t n() const { return static_cast<std::int64_t>(expert.size()); }
};

Rows rows_of(int member, int members, Routing routing, std::uint64_t seed) {
  Rows r;
  r.counts.assign(kExperts, 0);
  std::int64_t n = 9 + 5 * member;
  if ((routing == Routing::silent_member && member == 1) || routing == Routing::silent) n = 0;
  std::vector<std::int32_t> chosen;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto m = static_cast<std::uint64_t>(member), at = static_cast<std::uint64_t>(i);
    const std::uint64_t h = mix(seed * 7919u + m * 104729u + at);
    int e = static_cast<int>(h % kExperts);
    if (routing == Routing::some_empty) e = 3 * static_cast<int>(h % (kExperts / 3));
    if (routing == Routing::one_member) e = static_cast<int>(h % static_cast<std::uint64_t>(kExperts / members));
    chosen.push_back(e);
    ++r.counts[static_cast<std::size_t>(e)];
  }
  for (int e = 0; e < kExperts; ++e)  // expert order
    for (std::int32_t c : chosen)
      if (c == e) r.expert.push_back(e);
  const auto m = static_cast<std::uint64_t>(member);
  for (std::int64_t i = 0; i < n * kWidth; ++i) {
    const auto at = static_cast<std::uint64_t>(i);
    r.x.push_back(eighth(mix(seed + 11u * m + 1000003u * at)));
    r.d_out.push_back(eighth(mix(seed + 13u * m + 999983u * at + 5)));
  }
  return r;
}

std::vector<float> weights(std::uint64_t seed) {  // (E, D, D)
  std::vector<float> w(static_cast<std::size_t>(kExperts * kWidth * kWidth));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = eighth(mix(seed * 31u + i + 77));
  return w;
}

// Linear experts; only the owner may run one.
class LinearExperts final : public ExpertCompute {
 public:
  LinearExperts(std::vector<float> w, ExpertPlacement placement)
      : w_(std::move(w)), dw_(w_.size(), 0.0f), placement_(placement) {}
  void forward(Backend& be, int e, Tensor out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    be.linear_forward(out, in, weight(w_, e));
  }
  void backward(Backend& be, int e, Tensor d_in, Tensor d_out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    be.linear_backward_input(d_in, d_out, weight(w_, e));
    be.linear_backward_weight(weight(dw_, e), d_out, in);
  }
  const std::vector<float>& grads() const { return dw_; }

 private:
  static Tensor weight(std::vector<float>& v, int e) {
    return Tensor(v.data() + static_cast<std::size_t>(e * kWidth * kWidth), Shape{kWidth, kWidth});
  }
  std::vector<float> w_, dw_;
  ExpertPlacement placement_;
};

// The same experts split over a tp group like the MoE layer's: tp rank t holds the input
// columns [t D / tp, (t + 1) D / tp) of every expert's weights (a row-parallel linear), so its
// outputs are partial sums over tp and its input gradients are zero outside its columns.
class ShardedLinearExperts final : public ExpertCompute {
 public:
  ShardedLinearExperts(std::vector<float> w, ExpertPlacement placement, int tp, int tp_rank)
      : w_(std::move(w)),
        dw_(w_.size(), 0.0f),
        placement_(placement),
        first_(kWidth * tp_rank / tp),
        end_(kWidth * (tp_rank + 1) / tp) {}
  void forward(Backend&, int e, Tensor out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    const float* x = in.f32();
    float* y = out.f32();
    for (std::int64_t i = 0; i < in.shape[0]; ++i)
      for (std::int64_t o = 0; o < kWidth; ++o) {
        float sum = 0;
        for (std::int64_t j = first_; j < end_; ++j) sum += x[i * kWidth + j] * w(e, o, j);
        y[i * kWidth + o] = sum;
      }
  }
  void backward(Backend&, int e, Tensor d_in, Tensor d_out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    const float *x = in.f32(), *dy = d_out.f32();
    float* dx = d_in.f32();
    for (std::int64_t i = 0; i < in.shape[0]; ++i)
      for (std::int64_t j = 0; j < kWidth; ++j) {
        float sum = 0;
        if (j >= first_ && j < end_)
          for (std::int64_t o = 0; o < kWidth; ++o) sum += dy[i * kWidth + o] * w(e, o, j);
        dx[i * kWidth + j] = sum;
      }
    for (std::int64_t o = 0; o < kWidth; ++o)
      for (std::int64_t j = first_; j < end_; ++j) {
        float sum = 0;
        for (std::int64_t i = 0; i < in.shape[0]; ++i) sum += dy[i * kWidth + o] * x[i * kWidth + j];
        dw_[index(e, o, j)] += sum;
      }
  }
  const std::vector<float>& grads() const { return dw_; }
  bool holds(std::int64_t column) const { return column >= first_ && column < end_; }

 private:
  static std::size_t index(int e, std::int64_t o, std::int64_t j) {
    return static_cast<std::size_t>((e * kWidth + o) * kWidth + j);
  }
  float w(int e, std::int64_t o, std::int64_t j) const { return w_[index(e, o, j)]; }
  std::vector<float> w_, dw_;
  ExpertPlacement placement_;
  std::int64_t first_, end_;
};

// The dispatcher's planned buffers, sized like the trainer's plan sizes them.
struct Buffers {
  Buffers(std::int64_t send_rows, std::int64_t capacity, std::int64_t gathered_rows = 0)
      : send(static_cast<std::size_t>(send_rows * kWidth)),
        recv(static_cast<std::size_t>(capacity * kWidth)),
        recv_grad(recv.size()),
        result(recv.size()),
        gathered(static_cast<std::size_t>(gathered_rows * kWidth)) {}
  DispatchBuffers tensors(std::int64_t send_rows, std::int64_t capacity) {
    return {Tensor(send.data(), Shape{send_rows, kWidth}), Tensor(recv.data(), Shape{capacity, kWidth}),
            Tensor(recv_grad.data(), Shape{capacity, kWidth}), Tensor(result.data(), Shape{capacity, kWidth}),
            Tensor(gathered.data(), Shape{static_cast<std::int64_t>(gathered.size()) / kWidth, kWidth})};
  }
  std::vector<float> send, recv, recv_grad, result, gathered;
};

// Rows member `s` routes to member `d` (all of `all`'s counts of d's experts).
std::int64_t routed(const std::vector<Rows>& all, const ExpertPlacement& pl, int s, int d) {
  std::int64_t n = 0;
  for (int e = d * pl.per_member(); e < (d + 1) * pl.per_member(); ++e)
    n += all[static_cast<std::size_t>(s)].counts[static_cast<std::size_t>(e)];
  return n;
}

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
  for (std::int64_t i = 0; i < n; ++i) {
    const std::size_t e = static_cast<std::size_t>(mine.expert[static_cast<std::size_t>(i)]);
    for (std::int64_t o = 0; o < kWidth; ++o) {
      float y = 0, g = 0;
      for (std::int64_t j = 0; j < kWidth; ++j) {
        y += x[static_cast<std::size_t>(i * kWidth + j)] * w[(e * kWidth + o) * kWidth + j];
        g += d_out[static_cast<std::size_t>(i * kWidth + j)] * w[(e * kWidth + j) * kWidth + o];
      }
      ASSERT_EQ(out[static_cast<std::size_t>(i * kWidth + o)], y) << "row " << i << " output " << o;
      ASSERT_EQ(d_in[static_cast<std::size_t>(i * kWidth + o)], g) << "row " << i << " input gradient " << o;
    }
  }
  // Weight gradients: every member's rows of an owned expert, nothing for the others.
  std::vector<float> dw(w.size(), 0.0f);
  for (const Rows& r : all)
    for (std::int64_t i = 0; i < r.n(); ++i) {
      const std::size_t e = static_cast<std::size_t>(r.expert[static_cast<std::size_t>(i)]);
      if (!dispatcher.placement().owns(static_cast<int>(e))) continue;
      for (std::int64_t o = 0; o < kWidth; ++o)
        for (std::int64_t j = 0; j < kWidth; ++j)
          dw[(e * kWidth + o) * kWidth + j] +=
              r.d_out[static_cast<std::size_t>(i * kWidth + o)] * r.x[static_cast<std::size_t>(i * kWidth + j)];
    }
  EXPECT_EQ(experts.grads(), dw);

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
  std::vector<float> zeros(kWidth, 0.0f);
  std::vector<float> to_others(static_cast<std::size_t>(n), 0.0f);  // 1: this rank holds the row's full result
  for (std::int64_t i = 0; i < n; ++i) {
    if (pl.owns(mine.expert[static_cast<std::size_t>(i)])) continue;
    const auto row = out.begin() + i * kWidth;
    to_others[static_cast<std::size_t>(i)] = std::equal(row, row + kWidth, zeros.begin()) ? 0.0f : 1.0f;
  }
  // The tp group's sums.
  tp.all_reduce(tout).wait();
  tp.all_reduce(tdi).wait();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::size_t e = static_cast<std::size_t>(mine.expert[static_cast<std::size_t>(i)]);
    for (std::int64_t o = 0; o < kWidth; ++o) {
      float y = 0, g = 0;
      for (std::int64_t j = 0; j < kWidth; ++j) {
        y += x[static_cast<std::size_t>(i * kWidth + j)] * w[(e * kWidth + o) * kWidth + j];
        g += d_out[static_cast<std::size_t>(i * kWidth + j)] * w[(e * kWidth + j) * kWidth + o];
      }
      ASSERT_EQ(out[static_cast<std::size_t>(i * kWidth + o)], y) << "row " << i << " output " << o;
      ASSERT_EQ(d_in[static_cast<std::size_t>(i * kWidth + o)], g) << "row " << i << " input gradient " << o;
    }
  }
  // Each row to another member came back full to one tp rank (a row whose result is zero
  // counts on none: the reference says which).
  tp.all_reduce(Tensor(to_others.data(), Shape{n})).wait();
  for (std::int64_t i = 0; i < n; ++i) {
    if (pl.owns(mine.expert[static_cast<std::size_t>(i)])) continue;
    const auto row = out.begin() + i * kWidth;
    const bool zero = std::equal(row, row + kWidth, zeros.begin());
    EXPECT_EQ(to_others[static_cast<std::size_t>(i)], zero ? 0.0f : 1.0f) << "row " << i;
  }
  // Weight gradients: every member's rows of an owned expert, in this rank's columns.
  std::vector<float> dw(w.size(), 0.0f);
  for (const Rows& r : all)
    for (std::int64_t i = 0; i < r.n(); ++i) {
      const std::size_t e = static_cast<std::size_t>(r.expert[static_cast<std::size_t>(i)]);
      if (!pl.owns(static_cast<int>(e))) continue;
      for (std::int64_t o = 0; o < kWidth; ++o)
        for (std::int64_t j = 0; j < kWidth; ++j)
          if (experts.holds(j))
            dw[(e * kWidth + o) * kWidth + j] +=
                r.d_out[static_cast<std::size_t>(i * kWidth + o)] * r.x[static_cast<std::size_t>(i * kWidth + j)];
    }
  EXPECT_EQ(experts.grads(), dw);

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
