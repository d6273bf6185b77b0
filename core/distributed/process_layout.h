// This process's place in a training job: how it was launched, the mesh, and the named
// groups the trainer communicates over (parallel/process_groups.h). The trainer asks it for
// ranks and groups; it never computes a rank itself (the mesh does).
#pragma once

#include <memory>
#include <vector>

#include "core/distributed/rank_agreement.h"
#include "core/recipe/recipe.h"
#include "parallel/comm/communicator.h"
#include "parallel/mesh.h"
#include "parallel/process_groups.h"
#include "parallel/context_split.h"
#include "parallel/world.h"

namespace ustrain {

// The recipe's mesh (its parallel.* sizes, hybrid sharding's dp_shard included).
MeshShape mesh_shape_of(const Recipe& recipe);

// The launch's world before its layout is known, with the recipe's communication deadline
// (parallel.comm_timeout_s): MPI starts here when there is more than one process.
std::unique_ptr<World> start_world(const Recipe& recipe, const ProcessInfo& process);

class ProcessLayout {
 public:
  // Discovers the launcher's ranks, checks them against the recipe's layout (a clear error on
  // every rank, before any communication), starts MPI when there is more than one process,
  // checks that every rank holds the same `facts` (core/distributed/rank_agreement.h) under
  // parallel.startup_timeout_s, then builds the named groups, whose operations have
  // parallel.comm_timeout_s.
  // `started`: the world of this launch when it was started earlier (start_world), for the
  // ranks to agree on the layout first (parallel.layout = "auto"); the layout is then checked
  // against it.
  ProcessLayout(const Recipe& recipe, const std::vector<RankFact>& facts, std::unique_ptr<World> started = nullptr);

  int rank() const { return mesh_.rank(); }
  int world_size() const { return mesh_.world_size(); }
  // This process among those of its node: which GPU it uses.
  int local_rank() const { return world_->process().local_rank; }
  // Rank 0 logs, writes metrics and the checkpoint manifest.
  bool leads() const { return rank() == 0; }
  const Mesh& mesh() const { return mesh_; }
  ProcessGroups& groups() { return *groups_; }
  // The deadlines of the training groups (parallel.comm_timeout_s).
  const CommOptions& comm_options() const { return world_->defaults(); }
  // This rank's data reader and the number of readers: ranks that see the same sequences (the
  // members of one tensor-, context- and pipeline-parallel group) read the same data.
  int data_reader() const { return mesh_.coord(MeshDim::dp); }
  int data_readers() const { return mesh_.shape().dp; }
  // The part of every sequence this rank holds: its context-parallel rank and their number.
  ContextSplit context() const { return {mesh_.shape().cp, mesh_.coord(MeshDim::cp)}; }
  // Every rank, reserved for the checkpoint writer (which may use it from its own thread);
  // null for a single process.
  Communicator* checkpoint_group() { return checkpoints_.get(); }
  // Returns once every rank has called it.
  void barrier();

 private:
  std::unique_ptr<World> world_;  // destroyed last: the groups below are its communicators
  Mesh mesh_;
  std::unique_ptr<ProcessGroups> groups_;
  std::unique_ptr<Communicator> checkpoints_;
};

}  // namespace ustrain
