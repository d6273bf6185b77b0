// The time of the bytes a group carries, over the links the group spans, and the overlap
// rules of today's code (written down once, here, and applied by step_time.cpp):
//
//   tp (tensor and sequence parallelism)  blocking inside the layer that issues it: exposed.
//   gradients (dp x cp), gradient sync    issued as buckets fill during the last micro-batch's
//     (all-reduce, ZeRO reduce-scatter)   backward (parallel.overlap_comm) and run one after
//                                         another on the group; the step waits for the last at
//                                         the end of backward. Priced as filling evenly over
//                                         the action: the first bucket leaves after 1/k of it,
//                                         the last at its end. Without overlap_comm, exposed.
//   gradients, ZeRO-3 parameter gathers   prefetched one layer ahead (overlap_comm): exposed
//                                         only where an action's gathers outlast its compute.
//   cp (ring attention's key/value        the next key/value block travels while this one
//     blocks and gradient sums)           computes (parallel/ring_attention.cpp): exposed only
//                                         where an action's key/value transfers outlast its
//                                         attention. The backward's gradient sums, as large as
//                                         the key/values it passes, wait: exposed. So a
//                                         forward exposes max(0, ring - attention), a backward
//                                         ring / 2 + max(0, ring / 2 - attention).
//   ep (all-to-all of routed rows)        each exchange runs under the layer's shared experts
//                                         and the rows a rank routes to its own experts
//                                         (parallel/expert_dispatch.h); priced as exposed, an
//                                         upper bound (the recorded ops do not say which
//                                         GEMMs those are).
//   expert gradients (dp x cp / ep)       as the dense gradients, in the same queue.
//   dp_shard, dp_replicate (hybrid        as the gradients, in the same queue: the block's
//     sharding's block and the ranks      gathers prefetched, its reduce-scatters and the
//     holding the same shard)             shards' all-reduce across the blocks queued.
//   pp (activations and gradients)        non-blocking, posted one compute early: the
//                                         pipeline simulator adds their time as the transfer
//                                         between a send and the data's use.
//   after the schedule (ZeRO-1/2 gathers  blocking: exposed.
//     of updated weights, tied
//     embeddings, leftover buckets)
//   host scalars (loss, gradient norm)    a few latencies: left out.
//
// A collective over n ranks moves the wire bytes CommVolume counts (ring algorithms,
// parallel/comm/communicator.h) over the slowest link it spans, at 80% of its bandwidth (NCCL's
// bus bandwidth on NVLink and InfiniBand), plus a latency per ring step: 2 (n - 1) for an
// all-reduce, n - 1 for the others, 2 log2 n for an all-reduce across nodes (NCCL's trees).
#pragma once

#include <vector>

#include "core/plan/hardware.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

inline constexpr double kLinkEfficiency = 0.8;

// A group of `members` ranks, within one node or spanning several.
struct GroupSpan {
  int members = 1;
  bool across_nodes = false;
};

// Whether the global ranks `ranks` sit on more than one node of `per_node` consecutive ranks.
bool spans_nodes(const std::vector<int>& ranks, int per_node);

// Seconds for `volume` over a group spanning `span`, on `hw`'s links.
double comm_seconds(const CommVolume& volume, const GroupSpan& span, const Hardware& hw);
// Seconds of the all-gathers alone (ZeRO-3's parameter gathers).
double gather_seconds(const CommVolume& volume, const GroupSpan& span, const Hardware& hw);

}  // namespace ustrain
