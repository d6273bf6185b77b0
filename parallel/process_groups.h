// The named process groups of a training step, built the same way on every rank from the
// mesh. Every reduction names the group it runs over; nothing else makes a group.
//
//   group       mesh dimensions   what goes over it
//   world       all               agreement at start, stop requests, the gradient norm
//   tp          tp                tensor- and sequence-parallel activations and their gradients,
//                                 partial gradients of parameters replicated over tp
//   dp          dp                the data-parallel (ZeRO) reductions of dense parameters
//   gradients   dp, cp            (the same ranks while cp = 1: context-parallel ranks see other
//                                 tokens of the same sequences, so their gradients add too)
//   loss        pp, dp, cp        loss and token sums: the ranks that see different tokens (only
//                                 the last pipeline stage computes losses; the others add 0)
//   replica     pp, tp            the ranks that together hold one copy of the model
//   pp, cp      one each          pipeline and context parallelism
//   ep          ep consecutive    expert parallelism: the tokens routed to experts held elsewhere
//               ranks of dp x cp  (parallel/mesh.h; ep borrows its ranks from dp x cp)
//   expert_gradients              the gradients of expert parameters: the ranks of dp x cp that
//               complement of ep  hold the same experts (dp x cp, like gradients, while ep = 1)
//   embedding   first and last    a tied embedding's two copies (pp > 1; on other stages none)
//               pp stage
//   dp_shard    dp_shard x cp     hybrid sharding (parallel.dp_shard < dp, parallel/mesh.h): the
//                                 ranks ZeRO shards dense parameters over, gathers and
//                                 reduce-scatters; without it, the gradients group itself
//   dp_replicate dp / dp_shard    the ranks holding the same shard in the other blocks: the
//                                 reduced gradient shards are summed over them (one rank alone
//                                 without hybrid sharding)
//
// Each group has a host communicator (MPI, or the group of one) for host tensors and host
// scalars, and, when the model computes on a GPU, a device communicator for device tensors:
// NCCL (bootstrapped through the host one) when every rank has a GPU of its own, or the
// host-staged one (parallel/comm/staged_communicator.h) when ranks share one. Host scalars (loss
// sums, norms) are reduced in float64 on the host communicator, never through the device one.
// A group of one has no device communicator: nothing is ever exchanged over it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/mesh.h"
#include "parallel/world.h"

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace ustrain {

class ProcessGroup {
 public:
  ProcessGroup(std::string label, std::unique_ptr<Communicator> host);

  const std::string& label() const { return label_; }  // "tp", "dp+cp", ...
  int size() const { return host_->size(); }
  int rank() const { return host_->rank(); }  // this rank's index in the group
  Communicator& host() { return *host_; }
  // The communicator for tensors on `device`: the device one attached for that device if
  // any (GPU tensors on CUDA runs; CPU tensors under a host-staged one on the CPU), else the
  // host one for CPU tensors.
  Communicator& for_tensors(Device device);
  // In float64 on the host communicator; the value itself, bit for bit, in a group of one.
  double sum(double value);
  // True on every member when true on any.
  bool any(bool flag);

  // Seconds spent blocked waiting for this group's operations (both communicators).
  double blocked_seconds() const;

  // Creates the device communicator (collective over the members).
  void attach_device(std::unique_ptr<Communicator> device) { device_ = std::move(device); }
  // Traces the operations of both communicators (parallel/comm/comm_trace.h); null stops.
  void set_tracer(Tracer* tracer);

 private:
  std::string label_;
  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;
};

// Where device communicators compute: the GPU and the stream that produces their inputs.
struct DeviceCommSetup {
  int cuda_device = 0;
  CUstream_st* compute_stream = nullptr;
};

// Makes the host communicator of one group: its global ranks in group order (this rank
// among them) and its label.
using GroupFactory = std::function<std::unique_ptr<Communicator>(const std::vector<int>& ranks, const std::string& label)>;
// Makes a group's device communicator from the group (its host communicator and label).
using DeviceGroupFactory = std::function<std::unique_ptr<Communicator>(ProcessGroup& group)>;

class ProcessGroups {
 public:
  // Collective over the world: every rank builds the same groups in the same order.
  ProcessGroups(World& world, const Mesh& mesh);
  // The groups of `mesh`'s rank over the communicators `make` returns (World's above; the
  // counting ones of parallel/counting_world.h), made in the same order.
  ProcessGroups(const Mesh& mesh, const GroupFactory& make);
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  // Adds NCCL communicators to every group of several ranks that carries device tensors
  // (tp, pp, dp, cp, ep, gradients, expert_gradients, embedding, dp_shard, dp_replicate). Collective. UserError when this build has no NCCL.
  void attach_devices(const DeviceCommSetup& setup, CommOptions options);
  // The same with the device communicators `make` returns, for the same groups.
  void attach_devices(const DeviceGroupFactory& make);
  // Traces every group's operations into `tracer` (parallel/comm/comm_trace.h); null stops.
  // Call it after attach_devices().
  void set_tracer(Tracer* tracer);
  // Seconds this rank has spent blocked waiting for its peers, over every group.
  double blocked_seconds() const;

  ProcessGroup& world() { return *world_; }
  ProcessGroup& tp() { return *tp_; }
  ProcessGroup& pp() { return *pp_; }
  ProcessGroup& dp() { return *dp_; }
  ProcessGroup& cp() { return *cp_; }
  ProcessGroup& ep() { return *ep_; }
  ProcessGroup& gradients() { return *gradients_; }
  ProcessGroup& expert_gradients() { return *expert_gradients_; }
  ProcessGroup& loss() { return *loss_; }
  ProcessGroup& replica() { return *replica_; }
  // The first and last pipeline stages of this rank's pipeline; null on the others and at pp = 1.
  ProcessGroup* embedding() { return embedding_.get(); }
  ProcessGroup& dp_shard() { return dp_shard_ ? *dp_shard_ : *gradients_; }
  ProcessGroup& dp_replicate() { return *dp_replicate_; }

 private:
  // Every group this rank is a member of (null entries left out).
  std::vector<ProcessGroup*> all() const;

  std::unique_ptr<ProcessGroup> world_, tp_, pp_, dp_, cp_, ep_, gradients_, expert_gradients_, loss_, replica_,
      embedding_, dp_shard_, dp_replicate_;
};

}  // namespace ustrain
