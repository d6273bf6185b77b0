#include "parallel/world.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <exception>
#include <numeric>

#include "kernels/error.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/mpi_engine.h"
#include "parallel/comm/self_communicator.h"

namespace ustrain {
namespace {

void start_mpi(const ProcessInfo& process) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  USTRAIN_ASSERT(!initialized, "MPI is already initialised: make one World per process");
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_SERIALIZED || size != process.world_size || rank != process.rank) {
    // Every process sees the same mismatch, so every one stops here with this message.
    const std::string why =
        provided < MPI_THREAD_SERIALIZED
            ? "the MPI library does not support MPI_THREAD_SERIALIZED; use an MPI built with thread support"
            : fmt::format("{} announced rank {} of {} but MPI sees rank {} of {}; under Slurm start ustrain with "
                          "srun --mpi=pmix, and use the mpirun of the MPI ustrain was built with",
                          process.launcher, process.rank, process.world_size, rank, size);
    MPI_Finalize();
    throw UserError(why);
  }
}

}  // namespace

World::World(ProcessInfo process, CommOptions defaults) : process_(std::move(process)), defaults_(defaults) {
  if (process_.world_size == 1) return;
  start_mpi(process_);
  engine_ = std::make_unique<mpi_detail::Engine>();
}

World::~World() {
  if (!engine_) return;
  // During unwinding this rank is leaving early and its peers may be waiting for it inside
  // a collective: do not wait for the operations in flight.
  const bool clean = engine_->shut_down(/*drain=*/std::uncaught_exceptions() == 0);
  engine_.reset();
  if (clean) MPI_Finalize();
}

bool World::failed() const { return engine_ && engine_->failed(); }

std::unique_ptr<Communicator> World::communicator(const std::vector<int>& ranks, const std::string& label) {
  return communicator(ranks, label, defaults_);
}

std::unique_ptr<Communicator> World::communicator(const std::vector<int>& ranks, const std::string& label,
                                                  CommOptions options) {
  for (int r : ranks)
    USTRAIN_ASSERT(r >= 0 && r < size(), fmt::format("rank {} in the {} group is outside the world of {}", r, label, size()));
  if (ranks.size() == 1) {
    USTRAIN_ASSERT(ranks[0] == rank(), fmt::format("rank {} is not a member of its {} group", rank(), label));
    return std::make_unique<SelfCommunicator>(rank(), label);
  }
  USTRAIN_ASSERT(engine_ != nullptr, "a group of several ranks needs an MPI world");
  return std::make_unique<MpiCommunicator>(*engine_, ranks, rank(), label, options);
}

std::unique_ptr<Communicator> World::group(const Mesh& mesh, std::initializer_list<MeshDim> dims) {
  USTRAIN_ASSERT(mesh.rank() == rank() && mesh.world_size() == size(), "the mesh was made for another world");
  std::string label;
  for (int d = 0; d < kMeshDims; ++d)  // in mesh order, whatever order `dims` lists them in
    if (std::find(dims.begin(), dims.end(), static_cast<MeshDim>(d)) != dims.end()) {
      if (!label.empty()) label += '+';
      label += mesh_dim_name(static_cast<MeshDim>(d));
    }
  return communicator(mesh.group(dims), label);
}

std::unique_ptr<Communicator> World::everyone() {
  std::vector<int> all(static_cast<std::size_t>(size()));
  std::iota(all.begin(), all.end(), 0);
  return communicator(all, "world");
}

}  // namespace ustrain
