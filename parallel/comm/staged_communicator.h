// A communicator for device tensors that carries them through host memory: device -> host
// copy, the group's host (MPI) communicator, host -> device copy. It is what ranks that share
// a GPU use, since NCCL refuses two ranks on one device; over the CPU backend the same path
// runs with host copies, so its logic is tested where no GPU is.
//
// Each operation copies its inputs to host buffers of its own (after the compute stream has
// produced them), starts the host operation and returns; wait() waits for the host operation
// and copies the results back to the device, ordered before the compute that follows. The
// buffers belong to the operation until then, as the device tensors do. Sends and
// receives stay asynchronous on the host, so pipeline schedules that post a receive early
// cannot deadlock here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

class StagedCommunicator final : public Communicator {
 public:
  // `host` and `backend` must outlive this communicator; `host` carries the same group.
  StagedCommunicator(Communicator& host, Backend& backend, const std::string& label);
  // The same, owning its host communicator.
  StagedCommunicator(std::unique_ptr<Communicator> host, Backend& backend, const std::string& label);

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  const std::vector<int>& ranks() const override { return host_.ranks(); }
  const std::string& name() const override { return name_; }
  Device device() const override { return backend_.device(); }

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
  Work do_barrier() override { return host_.barrier(); }

 private:
  std::unique_ptr<Communicator> owned_host_;
  Communicator& host_;
  Backend& backend_;
  std::string name_;
};

}  // namespace ustrain
