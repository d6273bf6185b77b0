// Communication volume: the per-rank formulas for n members, and what a group of one counts
// (calls and payload, never wire bytes). The counts over real groups are checked under
// mpiexec in tests/mpi/collectives_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/comm/self_communicator.h"

#ifdef USTRAIN_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "parallel/comm/nccl_communicator.h"
#endif

namespace ustrain {
namespace {

TEST(WireBytes, RingFormulasForNMembers) {
  const std::int64_t b = 1200;  // divisible by 2, 3 and 4
  EXPECT_EQ(wire_bytes(CommOp::all_reduce, b, 2), 1200);  // 2 (n-1)/n B
  EXPECT_EQ(wire_bytes(CommOp::all_reduce, b, 3), 1600);
  EXPECT_EQ(wire_bytes(CommOp::all_reduce, b, 4), 1800);
  for (CommOp op : {CommOp::reduce_scatter, CommOp::all_gather, CommOp::all_to_all}) {
    EXPECT_EQ(wire_bytes(op, b, 2), 600) << comm_op_name(op);  // (n-1)/n B
    EXPECT_EQ(wire_bytes(op, b, 3), 800) << comm_op_name(op);
    EXPECT_EQ(wire_bytes(op, b, 4), 900) << comm_op_name(op);
  }
  EXPECT_EQ(wire_bytes(CommOp::broadcast, b, 3), b);  // the root's figure
  EXPECT_EQ(wire_bytes(CommOp::send, b, 3), b);
  EXPECT_EQ(wire_bytes(CommOp::recv, b, 3), 0);
  EXPECT_EQ(wire_bytes(CommOp::barrier, 0, 3), 0);
}

TEST(WireBytes, AllReduceOfAnAwkwardSizeRoundsDown) {
  EXPECT_EQ(wire_bytes(CommOp::all_reduce, 4004, 3), 5338);  // 2 * 2/3 * 4004 = 5338.67
  EXPECT_EQ(wire_bytes(CommOp::all_gather, 10, 4), 7);       // 3/4 * 10 = 7.5
  EXPECT_EQ(wire_bytes(CommOp::all_reduce, 0, 4), 0);
}

TEST(WireBytes, AGroupOfOneSendsNothing) {
  for (int k = 0; k < kCommOpCount; ++k) EXPECT_EQ(wire_bytes(static_cast<CommOp>(k), 4096, 1), 0) << k;
}

TEST(WireBytes, LargeBuffersOnLargeGroupsDoNotOverflow) {
  const std::int64_t b = std::int64_t{1} << 50;  // 1 PiB
  EXPECT_EQ(wire_bytes(CommOp::all_reduce, b, 1 << 16), b / (1 << 16) * 2 * ((1 << 16) - 1));
  EXPECT_EQ(wire_bytes(CommOp::reduce_scatter, b, 1 << 16), b / (1 << 16) * ((1 << 16) - 1));
}

TEST(CommVolume, IndexingTotalsAndArithmetic) {
  CommVolume v;
  v[CommOp::all_reduce] = OpVolume{2, 800, 1200};
  v[CommOp::send] = OpVolume{1, 100, 100};
  EXPECT_EQ(v.all_reduce.calls, 2);
  EXPECT_EQ(v.send.wire_bytes, 100);
  EXPECT_EQ(v.total(), (OpVolume{3, 900, 1300}));
  EXPECT_EQ(v.playbook_bytes(), 2 * 800 + 100);

  CommVolume sum = v;
  sum += v;
  EXPECT_EQ(sum.all_reduce, (OpVolume{4, 1600, 2400}));
  sum -= v;
  EXPECT_EQ(sum, v);
  EXPECT_EQ(CommVolume{}.total(), OpVolume{});
  EXPECT_EQ(CommVolume{}.summary(), "");
}

TEST(CommVolume, FormatsBytesInBinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3 * 1024 * 1024 + 256 * 1024), "3.25 MiB");
  EXPECT_EQ(format_bytes(std::size_t{2} << 30), "2.00 GiB");
}

TEST(CommVolume, AGroupOfOneCountsCallsAndPayloadButNoWireBytes) {
  SelfCommunicator c(0, "dp");
  std::vector<float> data(100), shard(100), in(10), out(10);
  const Tensor t(data.data(), Shape{100});
  c.all_reduce(t).wait();
  c.all_reduce(t, ReduceOp::avg).wait();
  c.reduce_scatter(Tensor(shard.data(), Shape{100}), t).wait();
  c.all_gather(t, Tensor(shard.data(), Shape{100})).wait();
  c.all_to_all(Tensor(out.data(), Shape{10}), Tensor(in.data(), Shape{10})).wait();
  const std::vector<std::int64_t> counts = {6};  // less than the buffers hold: only 6 elements move
  c.all_to_all_v(Tensor(out.data(), Shape{10}), counts, Tensor(in.data(), Shape{10}), counts).wait();
  c.broadcast(t, 0).wait();
  c.barrier().wait();

  const CommVolume& v = c.volume();
  EXPECT_EQ(v.all_reduce, (OpVolume{2, 800, 0}));
  EXPECT_EQ(v.reduce_scatter, (OpVolume{1, 400, 0}));
  EXPECT_EQ(v.all_gather, (OpVolume{1, 400, 0}));
  EXPECT_EQ(v.all_to_all, (OpVolume{2, 40 + 24, 0}));
  EXPECT_EQ(v.broadcast, (OpVolume{1, 400, 0}));
  EXPECT_EQ(v.barrier, (OpVolume{1, 0, 0}));
  EXPECT_EQ(v.send, OpVolume{});
  EXPECT_EQ(v.recv, OpVolume{});
  EXPECT_EQ(v.total(), (OpVolume{8, 800 + 400 + 400 + 64 + 400, 0}));

  const std::string s = v.summary();
  EXPECT_NE(s.find("all_reduce"), std::string::npos) << s;
  EXPECT_NE(s.find("800 B"), std::string::npos) << s;
  EXPECT_NE(s.find("total"), std::string::npos) << s;
  EXPECT_EQ(s.find("send"), std::string::npos) << s;  // unused kinds are left out

  c.reset_volume();
  EXPECT_EQ(c.volume(), CommVolume{});
}

TEST(CommVolume, RejectedOperationsAreNotCounted) {
  SelfCommunicator c(0, "dp");
  std::vector<float> a(4), b(3);
  std::vector<std::int32_t> i(4);
  EXPECT_THROW(c.reduce_scatter(Tensor(b.data(), Shape{3}), Tensor(a.data(), Shape{4})), std::logic_error);
  EXPECT_THROW(c.all_reduce(Tensor(i.data(), Shape{4}, DType::i32), ReduceOp::avg), std::logic_error);
  EXPECT_THROW(c.broadcast(Tensor(a.data(), Shape{4}), 1), std::logic_error);
  EXPECT_THROW(c.send(Tensor(a.data(), Shape{4}), 0), std::logic_error);
  EXPECT_THROW(c.recv(Tensor(a.data(), Shape{4}), 0), std::logic_error);
  EXPECT_EQ(c.volume(), CommVolume{});
}

// The Ultra-Scale Playbook's per-step volumes for a parameter buffer of Ψ bytes: plain data
// parallelism and ZeRO-1/2 move 2Ψ, ZeRO-3 3Ψ. Issued on a group of one, the calls and
// payloads are those of any group size.
TEST(CommVolume, PlaybookBytesOfTheZeroStages) {
  const std::int64_t n = 1000, psi = n * 4;
  std::vector<float> params(n), grads(n), shard(n);
  const Tensor p(params.data(), Shape{n}), g(grads.data(), Shape{n}), s(shard.data(), Shape{n});

  SelfCommunicator dp(0, "dp");
  dp.all_reduce(g).wait();  // stage 0: the gradients
  EXPECT_EQ(dp.volume().playbook_bytes(), 2 * psi);

  SelfCommunicator zero12(0, "dp");
  zero12.reduce_scatter(s, g).wait();  // gradient shards
  zero12.all_gather(p, s).wait();      // updated parameters
  EXPECT_EQ(zero12.volume().playbook_bytes(), 2 * psi);

  SelfCommunicator zero3(0, "dp");
  zero3.all_gather(p, s).wait();  // forward
  zero3.all_gather(p, s).wait();  // backward
  zero3.reduce_scatter(s, g).wait();
  EXPECT_EQ(zero3.volume().playbook_bytes(), 3 * psi);
}

#ifdef USTRAIN_HAVE_NCCL
// The NCCL backend counts through the same path: all_to_all, which NCCL runs as an
// all_to_all_v, is one call.
TEST(CommVolume, NcclGroupOfOneCountsLikeTheOthers) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) GTEST_SKIP() << "no GPU on this machine";
  SelfCommunicator bootstrap(0, "dp");
  NcclCommunicator nccl(bootstrap, "dp", 0, CommOptions{std::chrono::seconds(30)});
  void* raw = nullptr;
  ASSERT_EQ(cudaMalloc(&raw, 16 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(raw, 0, 16 * sizeof(float)), cudaSuccess);
  float* device = static_cast<float*>(raw);
  const Tensor a(device, Shape{8}, DType::f32, Device::cuda), b(device + 8, Shape{8}, DType::f32, Device::cuda);
  nccl.all_reduce(a).wait();
  nccl.all_to_all(b, a).wait();
  nccl.barrier().wait();
  cudaFree(raw);
  EXPECT_EQ(nccl.volume().all_reduce, (OpVolume{1, 32, 0}));
  EXPECT_EQ(nccl.volume().all_to_all, (OpVolume{1, 32, 0}));
  EXPECT_EQ(nccl.volume().barrier, (OpVolume{1, 0, 0}));
  EXPECT_EQ(nccl.volume().total().calls, 3);
}
#endif

}  // namespace
}  // namespace ustrain
