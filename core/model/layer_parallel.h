// How a layer's work is split over ranks, as the layers see it: one object handed to every
// block and sub-layer call. It carries tensor (and sequence) parallelism and context
// parallelism; expert parallelism joins it as a member, so that only the sub-layers it changes
// read it. The model never learns more of its parallelisation than this.
#pragma once

#include "parallel/ring_attention.h"
#include "parallel/tensor_parallel.h"

namespace ustrain {

struct LayerParallel {
  TensorParallel& tp;  // heads and MLP units split over tp ranks; residual rows too under sp
  RingAttention& cp;   // every sequence split over cp ranks: attention meets the others' keys,
                       // per-sequence statistics are summed over them
};

}  // namespace ustrain
