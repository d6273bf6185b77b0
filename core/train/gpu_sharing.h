// Whether ranks of a job share a GPU: NCCL refuses two ranks on one device, so such ranks
// exchange device tensors through the host-staged communicator (parallel/comm/staged_communicator.h).
#pragma once

#include <string>

#include "parallel/process_groups.h"

namespace ustrain {

// Collective over `world`: true on every rank when two ranks on one host use the same GPU
// (the same UUID: CUDA_VISIBLE_DEVICES may give it different indices in each process).
bool ranks_share_a_gpu(ProcessGroup& world, const std::string& gpu_uuid);

}  // namespace ustrain
