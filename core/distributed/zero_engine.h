// Data parallelism with the ZeRO stages of the Ultra-Scale Playbook, for one store of
// parameters and the ranks of its sync group (parallel.zero; the storage of each stage:
// core/model/param_store.h). Units are the store's numbers (ParamStore::units).
//
//   stage 0  gradients are all-reduced in buckets while the last micro-batch's backward runs
//            (core/distributed/gradient_reducer.h); every rank updates the whole model.
//   stage 1  as each unit's gradients complete in the last micro-batch, they are
//            reduce-scattered in place; each rank updates its chunk of every unit with its
//            optimizer state, then the units are all-gathered: in mixed precision the
//            compute copy (bf16 or fp16), whose chunk the update wrote from the rank's shard of
//            the fp32 masters (core/model/param_store.h).
//   stage 2  gradients are written into a few unit-sized buckets and reduce-scattered as each
//            unit completes, into the rank's gradient shard. This happens in every
//            micro-batch: the shard is all that persists of the gradients, so accumulation
//            happens there.
//   stage 3  values persist as shards too (in mixed precision the masters and the compute
//            copy, whose units are gathered). Each unit is all-gathered into a buffer just before
//            the model uses it (acquire) and may be overwritten once released; the engine
//            learns the order in which the model acquires units (the next one after each pair
//            of consecutive ones) and gathers the next one while the current one computes.
//
// Hybrid sharding (parallel.dp_shard): the group is one block of the data-parallel ranks and
// the other blocks hold the same shards (the replicate group). Once the block has reduced its
// gradients into each rank's chunks (the stages above), finish_backward all-reduces the chunks
// over the replicate group, so they hold the sum over every rank; the value gathers never leave
// the block.
//
// The model drives it through ParamUseHooks, which ParamEngines (core/distributed/
// param_engines.h) hands to the engine of the store that holds the unit; the trainer through
// the step calls below. Every rank makes the same calls in the same order, so collectives
// match.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/distributed/gradient_reducer.h"
#include "core/distributed/optimizer.h"
#include "core/model/param_store.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

class ZeroEngine {
 public:
  // `params` are planned and bound with the sharding of `group` (parts = group.size()).
  // Without `overlap`, every collective waits until its result is needed (or, for stages 2
  // and 3, completes at once): the baseline that shows what overlap hides. `replicate`: under
  // hybrid sharding, the ranks holding the same shards in the other blocks (stages 1-3).
  ZeroEngine(ParamStore& params, Backend& backend, Communicator& group, std::size_t bucket_bytes, bool overlap = true,
             Communicator* replicate = nullptr);
  ~ZeroEngine();
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  // Zeroes the gradients (or the gradient shard) before a step of `micro_batches`
  // micro-batches: a unit's gradients are complete once the model announced that many
  // backward passes of it (grads_done), whatever order a pipeline schedule runs them in.
  void begin_step(int micro_batches);
  // After the last backward: waits for the gradient reduction. The stored gradients (whole,
  // or this rank's chunks) then hold the sum over the group.
  void finish_backward();
  // `optimizer` on what this rank updates, then the values every rank needs (stages 1, 2:
  // all-gather every unit; stage 3: the next forward gathers).
  void optimizer_step(Optimizer& optimizer, const OptimizerStep& s);

  // Seconds the last step waited for gradient reduction, and (stage 3) for parameter
  // gathers: communication not hidden behind compute.
  double exposed_reduce_seconds() const { return exposed_reduce_seconds_; }
  double exposed_gather_seconds() const { return exposed_gather_seconds_; }

  // The uses of unit `unit` of the store (core/model/param_hooks.h).
  void acquire(int unit, bool backward);
  void release(int unit);
  void grads_done(int unit);

 private:
  struct ValueSlot {
    int unit = -1;
    Work work;
    bool gathering = false;
    int users = 0;
    std::uint64_t last_use = 0;
  };
  struct GradSlot {
    int unit = -1;       // the unit it holds, being written or reduced
    bool reducing = false;
    std::uint64_t launched = 0;
    Work work;
  };
  using Use = std::pair<int, bool>;  // (unit, backward)
  // The last two uses predict the next: one use alone is ambiguous where a unit appears twice
  // in a pass (a tied embedding is also the head).
  using History = std::pair<Use, Use>;

  int start_gather(int unit, bool demanded);
  // Stages 1, 2: every unit of the compute copy from the ranks' chunks.
  void gather_compute_copy();
  void drop_gathered();
  int take_grad_slot();
  void complete(GradSlot& slot);
  Tensor slot_part(const Tensor& slot, int unit) const;  // the first unit.length floats
  // Hybrid sharding: the block's reduced chunks summed over the replicate group.
  void sum_over_replicas();

  ParamStore& params_;
  Backend& backend_;
  Communicator& group_;
  Communicator* replicate_;  // null without hybrid sharding
  const bool reduces_;  // more than one rank
  const bool overlap_;
  const int zero_;
  // Mixed precision at stages 1, 2: the masters are sharded, so the compute copy is gathered
  // after each update and after the store refreshed its chunks (initialise, load), before the
  // model next uses a unit; gathered_version_ is the store's values_version() it last saw.
  const bool gathers_compute_copy_;
  std::uint64_t gathered_version_ = 0;
  std::unique_ptr<GradientReducer> reducer_;  // stage 0
  int micro_batches_ = 1;
  std::vector<int> backward_passes_;  // per unit, this step
  std::vector<Work> pending_;  // stage 1: reduce-scatters of the last micro-batch
  std::vector<int> deferred_;  // stage 1 without overlap: units to reduce after backward
  std::vector<ValueSlot> value_slots_;
  std::vector<int> value_slot_of_;  // unit -> slot or -1
  std::vector<GradSlot> grad_slots_;
  std::vector<int> grad_slot_of_;   // unit -> slot being written, or -1
  std::map<History, Use> next_use_;  // learnt order of acquisitions, for prefetching
  std::optional<Use> last_use_, use_before_last_;
  std::uint64_t clock_ = 0;
  double exposed_reduce_seconds_ = 0, exposed_gather_seconds_ = 0;
};

}  // namespace ustrain
