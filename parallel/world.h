// The World: this process's place among all ranks and the factory of communicators.
//
// A single process (world size 1) never touches MPI. With more ranks the World initialises
// MPI (MPI_THREAD_SERIALIZED, see mpi_engine.h), checks that MPI sees the processes the
// launcher announced, sets MPI_ERRORS_RETURN so that a transport error becomes a CommError
// instead of an abort, and starts the progress engine.
//
// Shutdown: communicators first, then the World. ~World finalises MPI, unless an operation
// failed or timed out or the World is destroyed during stack unwinding: then MPI's state is
// unknown and MPI_Finalize could wait forever for a dead peer, so it is skipped and the
// process is left to exit with its error status (mpirun and srun report that exit).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/launch.h"
#include "parallel/mesh.h"

namespace ustrain {

namespace mpi_detail {
class Engine;
}

class World {
 public:
  // Throws UserError when MPI disagrees with the launcher (e.g. srun without --mpi=pmix).
  explicit World(ProcessInfo process, CommOptions defaults = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  const ProcessInfo& process() const { return process_; }
  int rank() const { return process_.rank; }
  int size() const { return process_.world_size; }
  const CommOptions& defaults() const { return defaults_; }
  bool uses_mpi() const { return engine_ != nullptr; }

  // A host communicator over `ranks` (global ranks in group order, this rank among them),
  // named "<label> group (ranks ...)". Collective over the members: each calls it with the
  // same list, and members create their groups in the same order. A group of one needs no
  // MPI.
  std::unique_ptr<Communicator> communicator(const std::vector<int>& ranks, const std::string& label);
  std::unique_ptr<Communicator> communicator(const std::vector<int>& ranks, const std::string& label,
                                             CommOptions options);
  // This rank's group spanning `dims` of the mesh, labelled by its dimensions ("dp",
  // "dp+cp"). Every rank calls it for the same dims in the same order.
  std::unique_ptr<Communicator> group(const Mesh& mesh, std::initializer_list<MeshDim> dims);
  // Every rank, labelled "world".
  std::unique_ptr<Communicator> everyone();

  // True once an operation failed or timed out: MPI will not be finalised.
  bool failed() const;

 private:
  ProcessInfo process_;
  CommOptions defaults_;
  std::unique_ptr<mpi_detail::Engine> engine_;
};

}  // namespace ustrain
