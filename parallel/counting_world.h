// The named process groups (parallel/process_groups.h) of any rank of any layout, made on one
// process over counting communicators (parallel/comm/counting_communicator.h): no MPI, no peers.
// A rank's real training step runs over them unchanged, every operation completing at once,
// and each group's volume() then says what that rank would have sent over it.
//
// Host scalar reductions (ProcessGroup::sum, any) answer this rank's own value: the loss sum
// of this rank's tokens (0 off the last pipeline stage), the gradient norm of this rank's part,
// a stop request only when this process has one. A run that prices a step must not depend on
// them.
#pragma once

#include <memory>

#include "parallel/mesh.h"
#include "parallel/process_groups.h"

namespace ustrain {

// The groups of `mesh`'s rank. With `tensors` = Device::cuda, every group of several ranks
// that carries device tensors also gets a counting device communicator (as NCCL's would be).
std::unique_ptr<ProcessGroups> counting_process_groups(const Mesh& mesh, Device tensors = Device::cpu);

}  // namespace ustrain
