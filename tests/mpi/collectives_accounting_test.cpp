// The accounting of communicator operations on 2, 3 and 4 ranks: the spans a traced
// communicator records (log.trace_steps) and the volume each operation counts. With
// USTRAIN_TEST_STAGED=1, through the host-staged communicator (tests/mpi/collectives_support.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/comm/trace.h"
#include "tests/mpi/collectives_support.h"

namespace ustrain {
namespace {

using mpi_test::Buffer;
using mpi_test::everyone;

// log.trace_steps: operations on a traced communicator appear as spans from posting to
// completion, on lanes while they overlap, with the bytes they move and their peers.
TEST(Collectives, TracedOperationsRecordTheirSpansAndBytes) {
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  Tracer tracer;
  comm->set_tracer(&tracer);
  Buffer a(DType::f32, 1001), b(DType::f32, 33);
  a.fill_input(900, me);
  b.fill_input(901, me);
  comm->all_reduce(a.tensor()).wait();  // not recording yet
  EXPECT_TRUE(tracer.events().empty());

  tracer.start(Tracer::Clock::now());
  tracer.set_step(5);
  std::vector<Work> works;
  works.push_back(comm->all_reduce(a.tensor()));
  works.push_back(comm->all_reduce(b.tensor()));  // in flight beside the first: a second lane
  wait_all(works);
  Buffer message(DType::f32, 7), got(DType::f32, 7);
  message.fill_input(902, me);
  const std::vector<PeerTransfer> transfers = {
      {PeerTransfer::Kind::recv, got.tensor(), (me + p - 1) % p, 4},
      {PeerTransfer::Kind::send, message.tensor(), (me + 1) % p, 4}};
  std::vector<Work> exchanged = comm->exchange(transfers);
  wait_all(exchanged);
  tracer.stop();
  comm->barrier().wait();  // not recorded
  comm->set_tracer(nullptr);

  const std::vector<TraceEvent> events = tracer.events();
  ASSERT_EQ(events.size(), 4u);
  const auto arg = [](const TraceEvent& e, const char* key) {
    for (const TraceArg& x : e.args)
      if (std::string(x.key) == key) return x.value;
    ADD_FAILURE() << e.name << " has no argument " << key;
    return std::int64_t{-1};
  };
  EXPECT_EQ(events[0].name, "all_reduce");
  EXPECT_EQ(arg(events[0], "bytes"), 1001 * 4);
  EXPECT_EQ(arg(events[0], "wire_bytes"), wire_bytes(CommOp::all_reduce, 1001 * 4, p));
  EXPECT_EQ(arg(events[0], "members"), p);
  EXPECT_EQ(events[1].name, "all_reduce");
  EXPECT_EQ(arg(events[1], "bytes"), 33 * 4);
  EXPECT_NE(events[0].track, events[1].track) << "overlapping operations take separate lanes";
  EXPECT_EQ(events[2].name, "recv");
  EXPECT_EQ(arg(events[2], "peer_rank"), comm->ranks()[static_cast<std::size_t>((me + p - 1) % p)]);
  EXPECT_EQ(arg(events[2], "tag"), 4);
  EXPECT_EQ(events[3].name, "send");
  EXPECT_EQ(arg(events[3], "bytes"), 7 * 4);
  for (const TraceEvent& e : events) {
    EXPECT_EQ(e.step, 5);
    EXPECT_STREQ(e.category, "comm");
    EXPECT_GE(e.begin_ns, 0);
    EXPECT_LE(e.begin_ns, e.end_ns);
  }
  const std::vector<std::string> tracks = tracer.track_names();
  EXPECT_EQ(tracks[static_cast<std::size_t>(events[0].track)], comm->name());
  EXPECT_EQ(tracks[static_cast<std::size_t>(events[1].track)], comm->name() + " #2");
}

// The counted volume equals the ring formulas for the actual group size, written out here
// rather than taken from wire_bytes().
TEST(Collectives, CountedVolumeMatchesTheFormulasForTheGroupSize) {
  auto comm = everyone();
  const int p = comm->size(), me = comm->rank();
  const std::int64_t f32 = 4;
  EXPECT_EQ(comm->volume(), CommVolume{});  // a new communicator starts at zero

  Buffer data(DType::f32, 1001);
  data.fill_input(800, me);
  comm->all_reduce(data.tensor()).wait();
  const std::int64_t b = 1001 * f32;
  EXPECT_EQ(comm->volume().all_reduce, (OpVolume{1, b, 2 * (p - 1) * b / p}));

  const ShardLayout layout(1001, p);
  Buffer full(DType::f32, layout.padded), shard(DType::f32, layout.shard);
  full.fill_input(801, me);
  comm->reduce_scatter(shard.tensor(), full.tensor()).wait();
  comm->all_gather(full.tensor(), shard.tensor()).wait();
  const OpVolume sharded{1, layout.padded * f32, (p - 1) * layout.shard * f32};
  EXPECT_EQ(comm->volume().reduce_scatter, sharded);
  EXPECT_EQ(comm->volume().all_gather, sharded);

  const std::int64_t chunk = 3;
  Buffer in(DType::f32, chunk * p), out(DType::f32, chunk * p);
  in.fill_input(802, me);
  comm->all_to_all(out.tensor(), in.tensor()).wait();
  EXPECT_EQ(comm->volume().all_to_all, (OpVolume{1, chunk * p * f32, chunk * (p - 1) * f32}));
  // Uneven: rank s sends s + d + 1 elements to rank d; what stays on this rank is not sent.
  std::vector<std::int64_t> in_counts, out_counts;
  std::int64_t sent = 0;
  for (int d = 0; d < p; ++d) {
    in_counts.push_back(me + d + 1);
    out_counts.push_back(d + me + 1);
    sent += me + d + 1;
  }
  Buffer vin(DType::f32, sent), vout(DType::f32, sent);
  vin.fill_input(803, me);
  comm->all_to_all_v(vout.tensor(), out_counts, vin.tensor(), in_counts).wait();
  EXPECT_EQ(comm->volume().all_to_all, (OpVolume{2, (chunk * p + sent) * f32,
                                                 (chunk * (p - 1) + sent - (2 * me + 1)) * f32}));

  const int root = p - 1;
  comm->broadcast(data.tensor(), root).wait();
  EXPECT_EQ(comm->volume().broadcast, (OpVolume{1, b, me == root ? b : 0}));

  Buffer message(DType::f32, 7), got(DType::f32, 7);
  message.fill_input(804, me);
  std::vector<Work> works;
  works.push_back(comm->recv(got.tensor(), (me + p - 1) % p));
  works.push_back(comm->send(message.tensor(), (me + 1) % p));
  wait_all(works);
  EXPECT_EQ(comm->volume().send, (OpVolume{1, 7 * f32, 7 * f32}));
  EXPECT_EQ(comm->volume().recv, (OpVolume{1, 7 * f32, 0}));
  comm->barrier().wait();
  EXPECT_EQ(comm->volume().barrier, (OpVolume{1, 0, 0}));
  EXPECT_EQ(comm->volume().total().calls, 9);
  // The Playbook's convention: the all-reduce twice, the rest of what this rank sent once.
  EXPECT_EQ(comm->volume().playbook_bytes(),
            2 * b + 2 * layout.padded * f32 + (chunk * p + sent) * f32 + b + 7 * f32);

  // Summed over the group, a broadcast puts its buffer on the wire once.
  auto broadcast_wire = static_cast<std::int32_t>(comm->volume().broadcast.wire_bytes);
  comm->reset_volume();
  comm->all_reduce(Tensor(&broadcast_wire, Shape{1}, DType::i32)).wait();
  EXPECT_EQ(broadcast_wire, b);
  EXPECT_EQ(comm->volume().all_reduce, (OpVolume{1, 4, 2 * (p - 1) * 4 / p}));
  EXPECT_EQ(comm->volume().total().calls, 1);
}

}  // namespace
}  // namespace ustrain
