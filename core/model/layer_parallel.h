// How a layer's work is split over ranks, as the layers see it: one object handed to every
// block and sub-layer call. Today it carries tensor (and sequence) parallelism; context and
// expert parallelism join it as members, so that only the sub-layers they change read them.
// The model never learns more of its parallelisation than this.
#pragma once

#include "parallel/tensor_parallel.h"

namespace ustrain {

struct LayerParallel {
  TensorParallel& tp;  // heads and MLP units split over tp ranks; residual rows too under sp
};

}  // namespace ustrain
