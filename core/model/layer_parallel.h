// How a layer's work is split over ranks, as the layers see it: one object handed to every
// block and sub-layer call. It carries tensor (and sequence) parallelism, context parallelism
// and expert parallelism, each read only by the sub-layers it changes. The model never learns
// more of its parallelisation than this.
#pragma once

#include "parallel/expert_dispatch.h"
#include "parallel/ring_attention.h"
#include "parallel/tensor_parallel.h"

namespace ustrain {

struct LayerParallel {
  TensorParallel& tp;  // heads and MLP units split over tp ranks; residual rows too under sp
  RingAttention& cp;   // every sequence split over cp ranks: attention meets the others' keys,
                       // per-sequence statistics are summed over them
  ExpertDispatcher& ep;  // an MoE layer's experts over the ep ranks: its rows go to their owners
};

}  // namespace ustrain
