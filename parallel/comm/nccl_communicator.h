// The NCCL backend: a Communicator over CUDA device tensors. Built only where the CUDA
// toolkit and NCCL are found (USTRAIN_HAVE_NCCL); host code linked to cudart and NCCL,
// never to the driver library.
//
// - Bootstrap: member 0 creates the NCCL unique id and broadcasts it through `bootstrap`, a
//   host communicator of the same group (MPI, or the group of one), with its timeout.
// - Streams: the communicator owns a non-blocking communication stream. Each operation
//   first waits (on the GPU) for the work already queued on the compute stream, then runs
//   on the communication stream; its Work wraps a CUDA event recorded after it.
//   Work::wait() polls that event from the host: when it returns, the result is visible to
//   work queued afterwards on any stream. Work::join_compute() instead makes the compute
//   stream wait for the event on the GPU and returns at once (tensor-parallel layers use it,
//   so the host never polls between the kernels of a layer).
// - Deadlines, counted from when the operation was issued: wait() polls the event and
//   ncclCommGetAsyncError; an error or a passed deadline aborts the NCCL communicator
//   (ncclCommAbort, which also releases kernels stuck on a dead peer) and throws CommError.
//   The communicator is unusable afterwards.
// - NCCL has no tags: send/recv match per peer in issue order (issue them in the same order
//   on both sides); `tag` is only reported in messages. avg uses ncclAvg.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace ustrain {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over the members of `bootstrap`. Throws UserError when `cuda_device` cannot
  // be used (no GPU, no driver) and CommError when a member does not join in time.
  // `compute_stream` is the stream that produces inputs and consumes results (nullptr: the
  // legacy default stream).
  NcclCommunicator(Communicator& bootstrap, const std::string& label, int cuda_device, CommOptions options,
                   CUstream_st* compute_stream = nullptr);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const override { return ranks_; }
  const std::string& name() const override;
  Device device() const override { return Device::cuda; }
  CUstream_st* stream() const { return stream_; }

  struct Shared;  // the NCCL communicator and its failure state, shared with Work handles

 protected:
  // The operations, counted by Communicator.
  Work do_all_reduce(Tensor data, ReduceOp op) override;
  Work do_reduce_scatter(Tensor shard, Tensor full, ReduceOp op) override;
  Work do_all_gather(Tensor full, Tensor shard) override;
  Work do_all_to_all(Tensor out, Tensor in) override;
  Work do_all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                       std::span<const std::int64_t> in_counts) override;
  Work do_broadcast(Tensor data, int root) override;
  Work do_send(Tensor data, int peer, int tag) override;
  Work do_recv(Tensor data, int peer, int tag) override;
  std::vector<Work> do_exchange(std::span<const PeerTransfer> transfers) override;
  Work do_barrier() override;

 private:
  template <class Enqueue>
  Work launch(std::string what, Enqueue enqueue);

  std::vector<int> ranks_;
  int rank_ = 0;
  int cuda_device_ = 0;
  CommOptions options_;
  CUstream_st* compute_stream_ = nullptr;
  CUstream_st* stream_ = nullptr;
  void* scratch_ = nullptr;  // one device int for barrier()
  std::shared_ptr<Shared> shared_;
};

}  // namespace ustrain
