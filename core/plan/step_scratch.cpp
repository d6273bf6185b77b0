#include "core/plan/step_scratch.h"

#include "core/plan/step_profile.h"
#include "kernels/record/op_scratch.h"

namespace ustrain {

namespace {

StepScratch most_scratch(const RankProfile& step, const std::function<std::size_t(const RecordedOp&)>& bytes_of) {
  StepScratch most;
  const auto take = [&](const std::vector<RecordedOp>& ops) {
    for (const RecordedOp& op : ops)
      if (const std::size_t bytes = bytes_of(op); bytes > most.bytes) most = {bytes, op.name};
  };
  for (const ActionProfile& action : step.actions) take(action.ops);
  take(step.tail_ops);
  return most;
}

}  // namespace

StepScratch step_op_scratch(const Recipe& recipe, int pp_rank,
                            const std::function<std::size_t(const RecordedOp&)>& bytes_of) {
  return most_scratch(record_rank_step(step_recording(recipe, pp_rank).recipe, pp_rank,
                                       recipe.device.type == "cuda" ? Device::cuda : Device::cpu),
                      bytes_of);
}

namespace {

// The CPU backend takes op scratch only to widen 16-bit tensors.
bool cpu_without_scratch(const Recipe& recipe) {
  return recipe.device.type != "cuda" && recipe.train.precision == "fp32";
}

}  // namespace

std::function<std::size_t(const RecordedOp&)> deviceless_scratch_of(const Recipe& recipe) {
  if (cpu_without_scratch(recipe)) return {};
  if (recipe.device.type != "cuda") return [](const RecordedOp& op) { return cpu_widening_bytes(op); };
  return [](const RecordedOp& op) { return cuda_op_scratch_bytes(op); };
}

std::size_t deviceless_op_scratch(const Recipe& recipe, int pp_rank) {
  const auto bytes_of = deviceless_scratch_of(recipe);
  return bytes_of ? step_op_scratch(recipe, pp_rank, bytes_of).bytes : 0;
}

std::size_t deviceless_op_scratch(const Recipe& recipe, const RankProfile& step) {
  const auto bytes_of = deviceless_scratch_of(recipe);
  return bytes_of ? most_scratch(step, bytes_of).bytes : 0;
}

StepScratch backend_op_scratch(const Recipe& recipe, int pp_rank, Backend& backend) {
  if (cpu_without_scratch(recipe)) return {};
  return step_op_scratch(recipe, pp_rank, [&backend](const RecordedOp& op) { return backend.op_scratch_bytes(op); });
}

}  // namespace ustrain
