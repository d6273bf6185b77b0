// A communicator that moves nothing: every operation checks its arguments as the real
// backends do, completes at once and touches no data, while Communicator counts its volume
// exactly as for a real group (the counting lives in the base class). With it one process
// can run the step of any rank of any layout, every member but itself absent, and learn
// what that rank would send (parallel/counting_world.h builds the named groups).
//
// What the data becomes: nothing is written. An all-reduce leaves this rank's own values
// (a host scalar reduced over the group answers this rank's value), a gather or a receive
// leaves the buffer as it was.
#pragma once

#include <string>
#include <vector>

#include "parallel/comm/communicator.h"

namespace ustrain {

class CountingCommunicator final : public Communicator {
 public:
  // `ranks`: the group's global ranks in group order; this rank is member `rank`. `device`:
  // the tensors it accepts (a stand-in for NCCL when Device::cuda).
  CountingCommunicator(std::vector<int> ranks, int rank, const std::string& label, Device device = Device::cpu);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const override { return ranks_; }
  const std::string& name() const override { return name_; }
  Device device() const override { return device_; }

 protected:
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
  Work do_barrier() override { return Work(); }

 private:
  std::vector<int> ranks_;
  int rank_;
  std::string name_;
  Device device_;
};

}  // namespace ustrain
