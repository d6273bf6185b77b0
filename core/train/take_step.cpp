#include "core/train/take_step.h"

#include <fmt/format.h>

#include <vector>

namespace ustrain {
namespace {

// Micro-batch `m` into the staging (a copy: the reader's buffer is reused by its next call).
void stage(TokenStaging& staging, std::size_t m, const TokenBatch& mb) { staging.put(m, mb); }

}  // namespace

StepResult take_step(TrainingRank& run, TrainingData& data, const LrScheduleConfig& schedule, std::int64_t step,
                     PhaseTimer& timer, Tracer* trace) {
  const TraceScope step_span(trace, 0, "step", [&] { return fmt::format("step {}", step); });
  const auto micro_batches = static_cast<std::size_t>(run.recipe.grad_accum_steps());
  {
    const TraceScope span(trace, 0, "data", "data", {{"micro_batches", static_cast<std::int64_t>(micro_batches)}});
    for (std::size_t m = 0; m < micro_batches; ++m) stage(run.train_tokens, m, data.next_train());
  }
  timer.mark(Phase::data);
  return train_step(run, run.train_tokens.tokens(micro_batches), schedule, step, timer, trace);
}

double validation_pass(TrainingRank& run, TrainingData& data) {
  const auto& t = run.recipe.train;
  const auto micro_batches = static_cast<std::size_t>(run.pipeline.eval.shape.micro_batches);
  data.reset_validation();
  for (std::size_t m = 0; m < micro_batches; ++m) stage(run.eval_tokens, m, data.next_validation());
  const PipelineLoss local =
      run.eval_executor.run(run.backend, run.eval_tokens.tokens(micro_batches), t.micro_batch, run.geometry.seq, 0.0f);
  return run.groups.loss().sum(local.sum) / run.groups.loss().sum(local.tokens);
}

}  // namespace ustrain
