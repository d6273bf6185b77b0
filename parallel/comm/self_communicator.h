// The group of one: what a single process (or a mesh dimension of size 1) uses. Every
// operation completes before it returns and involves no MPI: a reduction over one member is
// the identity, gathers and all-to-alls are copies. Host tensors only (a device group of
// one is an NCCL communicator of size 1).
#pragma once

#include "parallel/comm/communicator.h"

namespace ustrain {

class SelfCommunicator final : public Communicator {
 public:
  SelfCommunicator(int global_rank, const std::string& label);

  int rank() const override { return 0; }
  int size() const override { return 1; }
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
  // A group of one has no peer: send and recv are programming errors.
  Work do_send(Tensor data, int peer, int tag) override;
  Work do_recv(Tensor data, int peer, int tag) override;
  std::vector<Work> do_exchange(std::span<const PeerTransfer> transfers) override;
  Work do_barrier() override { return Work(); }

 private:
  std::vector<int> ranks_;
  std::string name_;
};

}  // namespace ustrain
