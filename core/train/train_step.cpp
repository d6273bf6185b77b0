#include "core/train/train_step.h"

#include <fmt/format.h>

#include <vector>

namespace ustrain {
namespace {

// Micro-batches and the views the executor reads.
struct MicroBatches {
  std::vector<MicroBatch> batches;
  std::vector<MicroBatchTokens> tokens;
  explicit MicroBatches(std::size_t n) { batches.reserve(n); }
  void add(const MicroBatch& mb) {
    batches.push_back(mb);  // a copy: the reader's buffer is reused by its next call
    tokens.clear();
    for (const MicroBatch& b : batches) tokens.push_back({b.inputs.data(), b.targets.data()});
  }
};

}  // namespace

StepResult take_step(TrainingRank& run, TrainingData& data, const LrScheduleConfig& schedule, std::int64_t step,
                     PhaseTimer& timer, Tracer* trace) {
  const TraceScope step_span(trace, 0, "step", [&] { return fmt::format("step {}", step); });
  const auto micro_batches = static_cast<std::size_t>(run.recipe.grad_accum_steps());
  MicroBatches micro(micro_batches);
  {
    const TraceScope span(trace, 0, "data", "data", {{"micro_batches", static_cast<std::int64_t>(micro_batches)}});
    for (std::size_t m = 0; m < micro_batches; ++m) micro.add(data.next_train());
  }
  timer.mark(Phase::data);
  return train_step(run, micro.tokens, schedule, step, timer, trace);
}

double validation_pass(TrainingRank& run, TrainingData& data) {
  const auto& t = run.recipe.train;
  const auto micro_batches = static_cast<std::size_t>(run.pipeline.eval.shape.micro_batches);
  data.reset_validation();
  MicroBatches micro(micro_batches);
  for (std::size_t m = 0; m < micro_batches; ++m) micro.add(data.next_validation());
  const PipelineLoss local = run.eval_executor.run(run.backend, micro.tokens, t.micro_batch, run.geometry.seq, 0.0f);
  return run.groups.loss().sum(local.sum) / run.groups.loss().sum(local.tokens);
}

}  // namespace ustrain
