#include "core/distributed/process_layout.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "parallel/launch.h"

namespace ustrain {

MeshShape mesh_shape_of(const Recipe& r) {
  const auto& p = r.parallel;
  return MeshShape{.pp = static_cast<int>(p.pp), .dp = static_cast<int>(p.dp), .cp = static_cast<int>(p.cp),
                   .tp = static_cast<int>(p.tp), .ep = static_cast<int>(p.ep), .dp_shard = static_cast<int>(p.dp_shard)};
}

namespace {

ProcessInfo checked_process(const Recipe& recipe) {
  ProcessInfo process = discover_process();
  check_layout(process, mesh_shape_of(recipe));
  return process;
}

CommOptions deadline(double seconds, const char* key) {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
  options.timeout_setting = key;
  return options;
}

}  // namespace

std::unique_ptr<World> start_world(const Recipe& recipe, const ProcessInfo& process) {
  return std::make_unique<World>(process, deadline(recipe.parallel.comm_timeout_s, "parallel.comm_timeout_s"));
}

namespace {

// The started world, checked against the recipe's layout; else this launch's, checked before
// MPI starts.
std::unique_ptr<World> checked_world(const Recipe& recipe, std::unique_ptr<World> started) {
  if (!started) return start_world(recipe, checked_process(recipe));
  check_layout(started->process(), mesh_shape_of(recipe));
  return started;
}

}  // namespace

ProcessLayout::ProcessLayout(const Recipe& recipe, const std::vector<RankFact>& facts, std::unique_ptr<World> started)
    : world_(checked_world(recipe, std::move(started))),
      mesh_(mesh_shape_of(recipe), world_->process().rank, world_->process().world_size) {
  if (world_->size() > 1) {
    // Before any other group: ranks with different layouts would build different groups.
    // Every rank should be here within moments of the others: a short deadline, and no
    // patience for a rank that has not arrived.
    CommOptions handshake = deadline(recipe.parallel.startup_timeout_s, "parallel.startup_timeout_s");
    handshake.patience = handshake.timeout;
    std::vector<int> all(static_cast<std::size_t>(world_->size()));
    for (int r = 0; r < world_->size(); ++r) all[static_cast<std::size_t>(r)] = r;
    const std::unique_ptr<Communicator> everyone = world_->communicator(all, "world", handshake);
    check_ranks_agree(*everyone, facts);
  }
  groups_ = std::make_unique<ProcessGroups>(*world_, mesh_);
  if (world_->size() > 1) {
    std::vector<int> all(static_cast<std::size_t>(world_->size()));
    for (int r = 0; r < world_->size(); ++r) all[static_cast<std::size_t>(r)] = r;
    // Its collectives wait for every rank's file to be written: allow for a slow filesystem
    // (ranks that answer, writing, are waited for that long; a stopped one is found as fast).
    CommOptions slow = world_->defaults();
    slow.patience = std::max(slow.patience, std::chrono::milliseconds(std::chrono::minutes(30)));
    checkpoints_ = world_->communicator(all, "checkpoint", slow);
  }
}

void ProcessLayout::barrier() {
  if (world_size() > 1) groups_->world().host().barrier().wait();
}

}  // namespace ustrain
