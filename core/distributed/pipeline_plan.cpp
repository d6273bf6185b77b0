#include "core/distributed/pipeline_plan.h"

#include <algorithm>

namespace ustrain {

PipelineShape pipeline_shape(const Recipe& r, int micro_batches) {
  return {static_cast<int>(r.parallel.pp), static_cast<int>(r.parallel.virtual_stages), micro_batches};
}

PipelinePrograms plan_pipeline_programs(const Recipe& r) {
  const auto accum = static_cast<int>(r.grad_accum_steps());
  const PipelineSchedule schedule = parse_pipeline_schedule(r.parallel.pp_schedule);
  PipelinePrograms p;
  p.train = make_pipeline_program(schedule, pipeline_shape(r, accum));
  p.eval = make_forward_program(pipeline_shape(r, std::max<int>(1, static_cast<int>(r.train.eval_batches) * accum)));
  p.train_simulation = simulate_pipeline(p.train, ActionCosts{});
  p.eval_simulation = simulate_pipeline(p.eval, ActionCosts{});
  return p;
}

PipelinePlan pipeline_plan_of(const Recipe& r, const PipelinePrograms& programs, int pp_rank) {
  PipelinePlan p{programs.train, programs.eval, programs.train_simulation, {}};
  const PipelineSimulation& eval = programs.eval_simulation;
  const auto rank = static_cast<std::size_t>(pp_rank);
  for (int c = 0; c < static_cast<int>(r.parallel.virtual_stages); ++c) {
    const auto k = static_cast<std::size_t>(c);
    p.slots.slots.push_back(std::max({1, p.train_simulation.peak_chunk_slots[rank][k], eval.peak_chunk_slots[rank][k]}));
    p.slots.receive_buffers.push_back(
        std::max(p.train_simulation.peak_receive_buffers[rank][k], eval.peak_receive_buffers[rank][k]));
  }
  p.slots.split_backward = p.train.split_backward;
  p.slots.kept_losses = static_cast<int>(r.grad_accum_steps());  // a training step reads its losses once
  return p;
}

PipelinePlan plan_pipeline(const Recipe& r, int pp_rank) {
  return pipeline_plan_of(r, plan_pipeline_programs(r), pp_rank);
}

}  // namespace ustrain
