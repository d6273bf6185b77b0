#include "core/distributed/process_layout.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "parallel/launch.h"

namespace ustrain {
namespace {

MeshShape mesh_shape(const Recipe& r) {
  const auto& p = r.parallel;
  return MeshShape{static_cast<int>(p.pp), static_cast<int>(p.dp), static_cast<int>(p.cp), static_cast<int>(p.ep),
                   static_cast<int>(p.tp)};
}

ProcessInfo checked_process(const Recipe& recipe) {
  ProcessInfo process = discover_process();
  check_layout(process, mesh_shape(recipe));
  return process;
}

}  // namespace

ProcessLayout::ProcessLayout(const Recipe& recipe)
    : world_(checked_process(recipe)),
      mesh_(mesh_shape(recipe), world_.process().rank, world_.process().world_size),
      dp_(world_.group(mesh_, {MeshDim::dp})),
      everyone_(world_.everyone()) {
  if (world_.size() > 1) {
    std::vector<int> all(static_cast<std::size_t>(world_.size()));
    for (int r = 0; r < world_.size(); ++r) all[static_cast<std::size_t>(r)] = r;
    // Its collectives wait for every rank's file to be written: allow for a slow filesystem.
    CommOptions slow = world_.defaults();
    slow.timeout = std::max(slow.timeout, std::chrono::milliseconds(std::chrono::minutes(30)));
    checkpoints_ = world_.communicator(all, "checkpoint", slow);
  }
}

double ProcessLayout::sum_over_dp(double value) {
  if (dp_->size() == 1) return value;
  float v = static_cast<float>(value);
  dp_->all_reduce(Tensor(&v, Shape{1}), ReduceOp::sum).wait();
  return v;
}

void ProcessLayout::barrier() {
  if (everyone_->size() > 1) everyone_->barrier().wait();
}

bool ProcessLayout::any_over_world(bool flag) {
  if (everyone_->size() == 1) return flag;
  std::int32_t v = flag ? 1 : 0;
  everyone_->all_reduce(Tensor(&v, Shape{1}, DType::i32), ReduceOp::sum).wait();
  return v > 0;
}

}  // namespace ustrain
