// Launch and rank discovery: who this process is, read from the launcher's environment
// before MPI starts, so that a layout that does not fit the launch fails on every rank
// before any communication.
//
// Sources, first match wins:
//   mpirun (Open MPI)      OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
//   srun --mpi=pmix        SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), SLURM_LOCALID,
//                          SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE) at SLURM_NODEID;
//                          recognised as an srun task only when SLURM_STEP_NUM_TASKS or PMIX_RANK
//                          is set (a batch script's own shell has SLURM_PROCID but is one process);
//                          several tasks without PMIx (PMIX_RANK, or PMI_RANK) are an error, since
//                          MPI could not connect them
//   nothing                one process, no launcher
#pragma once

#include <functional>
#include <string>

#include "parallel/mesh.h"

namespace ustrain {

struct ProcessInfo {
  int rank = 0;
  int local_rank = 0;  // index among the processes on this node (selects the GPU)
  int world_size = 1;
  int local_world_size = 1;
  std::string launcher = "none";  // "none" | "mpirun" | "srun"
};

// Returns the value of an environment variable, or nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Throws UserError when the variables are malformed or contradict each other.
ProcessInfo discover_process(const EnvLookup& env);
ProcessInfo discover_process();  // from this process's environment

// Throws UserError (the same message on every rank) when `layout` needs another number of
// processes than were launched.
void check_layout(const ProcessInfo& process, const MeshShape& layout);

}  // namespace ustrain
