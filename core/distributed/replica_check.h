// Replicas that must be equal are compared (train.replica_check_interval): silent data
// corruption (a flipped bit in a GPU's or host's memory) shows as a data-parallel replica of the
// parameters that no longer equals the others.
//
// Each parameter store (core/model/param_store.h) is held whole by every rank of its sync group
// at ZeRO stages 0-2: dense parameters by the ranks of dp x cp, an expert's by its
// expert-gradient group. Every member computes a CRC-32 of its stored fp32 values and the
// checksums (4 bytes a rank, no parameter traffic) are gathered over the group. A member whose
// checksum differs from the majority's is named; where there is no majority (two replicas that
// differ) every member is named, since either may be the corrupt one. At ZeRO-3 the values are
// sharded and nothing is held twice, so there is nothing to compare, except under hybrid
// sharding (parallel.dp_shard): there the blocks of dp hold the same shards, and the members
// of each replicate group compare their shards of the stored values (at every stage that
// shards them: 3, and 1 and 2 in mixed precision) the same way.
//
// With train.replica_check_grads the same steps also compare the gradients once reduced, before
// the update: at ZeRO stage 0 every member holds all of them, summed by an all-reduce whose
// result is the same on every member. (At stages 1-3 each rank reduces only its own shard.)
//
// CRC-32 detects every single-bit error and every burst of up to 32 bits, so a flipped bit is
// never missed. Under ZeRO-1 and 2 a rank's copy of the parameters other ranks update is
// rewritten by the next step's all-gather: a flip there is caught only by a check before it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/model/params.h"
#include "kernels/backend.h"
#include "parallel/process_groups.h"

namespace ustrain {

// CRC-32 of `values` (any dtype, on the backend's device): on the host directly, from a device
// through a bounded host buffer.
std::uint32_t tensor_crc32(const Tensor& values, Backend& backend);

// The members whose checksum is not the majority's; every member when no checksum is held by
// more than half of them (and the members disagree).
std::vector<int> odd_members(std::span<const std::uint32_t> checksums);

// What a check compares.
enum class ReplicaSubject { parameters, gradients };

class ReplicaCheck {
 public:
  explicit ReplicaCheck(std::int64_t interval) : interval_(interval) {}
  bool enabled() const { return interval_ > 0; }
  bool due(std::int64_t step) const { return interval_ > 0 && step % interval_ == 0; }

  // Collective over the world: compares every store's replicas of `subject` at `step`. UserError
  // on every rank, naming the ranks that differ and the step, when any replica differs.
  void verify(std::int64_t step, const ModelParams& params, Backend& backend, ProcessGroups& groups,
              ReplicaSubject subject = ReplicaSubject::parameters) const;

 private:
  std::int64_t interval_;
};

// The message of a failed check: `verdict[r]` is 1 for a rank whose replica differs from the
// majority, 2 for a member of a group of replicas without a majority, 0 otherwise.
std::string replica_mismatch_message(std::int64_t step, std::span<const std::int32_t> verdict,
                                     ReplicaSubject subject = ReplicaSubject::parameters);

}  // namespace ustrain
