// The MPI backend: a Communicator over host tensors, one MPI communicator per group.
//
// Every operation is nonblocking (MPI_Iallreduce, MPI_Ireduce_scatter_block, ...), posted
// and progressed by the World's progress engine (parallel/comm/mpi_engine.h), so that it
// advances while the caller computes. Reductions: f32 and i32 natively, bf16 with a
// user-defined MPI operation that adds in f32 and rounds every partial sum to bf16; avg
// divides the sum by the group size afterwards. Data movement (gather, all-to-all,
// broadcast, send/recv) takes any dtype. Element counts must fit in an int (MPI's count
// type): 2^31 - 1 elements per buffer.
//
// Made by World::communicator; the communicator must not outlive its World.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/comm/mpi_channel.h"

namespace ustrain {

namespace mpi_detail {
class Engine;
class Group;
struct Handle;
}  // namespace mpi_detail

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `ranks` (global ranks, in group order; this rank among them): every
  // member calls it with the same list, in the same order relative to its other groups.
  MpiCommunicator(mpi_detail::Engine& engine, std::vector<int> ranks, int global_rank, const std::string& label,
                  CommOptions options);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const override { return ranks_; }
  const std::string& name() const override { return name_; }
  Device device() const override { return Device::cpu; }

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
  template <class Start>
  // `channel`: a send's or receive's, its peer a member of this communicator (the default: a
  // collective).
  Work submit(std::string what, Start start, std::function<void()> finish = {}, mpi_detail::Channel channel = {});

  mpi_detail::Engine& engine_;
  const std::vector<int> ranks_;
  int rank_ = 0;
  const std::string name_;
  const CommOptions options_;
  std::shared_ptr<mpi_detail::Group> group_;
  std::shared_ptr<mpi_detail::Handle> handle_;  // the MPI_Comm, set by the progress thread
};

}  // namespace ustrain
