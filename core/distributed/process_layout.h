// This process's place in a training job: how it was launched, the mesh, and the groups the
// trainer communicates over. The trainer asks it for ranks and reductions; it never computes
// a rank itself (the mesh does).
#pragma once

#include <memory>

#include "core/recipe.h"
#include "parallel/communicator.h"
#include "parallel/mesh.h"
#include "parallel/world.h"

namespace ustrain {

class ProcessLayout {
 public:
  // Discovers the launcher's ranks, checks them against the recipe's layout (a clear error on
  // every rank, before any communication), and starts MPI when there is more than one process.
  explicit ProcessLayout(const Recipe& recipe);

  int rank() const { return mesh_.rank(); }
  int world_size() const { return mesh_.world_size(); }
  // Rank 0 logs, writes metrics and the checkpoint manifest.
  bool leads() const { return rank() == 0; }
  int dp_rank() const { return mesh_.coord(MeshDim::dp); }
  int dp_size() const { return mesh_.shape().dp; }
  Communicator& dp() { return *dp_; }
  // Every rank, reserved for the checkpoint writer (which may use it from its own thread);
  // null for a single process.
  Communicator* checkpoint_group() { return checkpoints_.get(); }
  const Mesh& mesh() const { return mesh_; }

  // Sum over the data-parallel group (the value itself when dp = 1, bit for bit).
  double sum_over_dp(double value);
  // Returns once every rank has called it.
  void barrier();
  // True on every rank when it is true on any: ranks stop at the same step.
  bool any_over_world(bool flag);

 private:
  World world_;
  Mesh mesh_;
  std::unique_ptr<Communicator> dp_;
  std::unique_ptr<Communicator> everyone_;
  std::unique_ptr<Communicator> checkpoints_;
};

}  // namespace ustrain
