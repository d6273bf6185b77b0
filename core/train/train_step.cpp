#include "core/train/train_step.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "core/distributed/gradient_sync.h"

namespace ustrain {

ModelGeometry geometry_of(const Recipe& r, int tp_rank, int pp_rank) {
  const auto& p = r.parallel;
  return ModelGeometry::of(r.model, ModelSplit{static_cast<int>(p.tp), tp_rank, p.sp, static_cast<int>(p.pp), pp_rank,
                                               static_cast<int>(p.virtual_stages)});
}

ParamSharding sharding_of(const Recipe& r, int rank) {
  return ParamSharding{static_cast<int>(r.parallel.dp * r.parallel.cp), rank, static_cast<int>(r.parallel.zero)};
}

Run::Run(const Recipe& r, ProcessLayout& layout, std::unique_ptr<Backend> be, std::size_t bucket_bytes,
         MemoryShare memory)
    : recipe(r),
      groups(layout.groups()),
      geometry(geometry_of(r, groups.tp().rank(), groups.pp().rank())),
      tp(groups.tp().for_tensors(be->device()), r.parallel.sp, VocabShard{geometry.vocab_begin, geometry.vocab_valid}),
      pipeline(plan_pipeline(r, groups.pp().rank())),
      instance(r, r.train.micro_batch, r.train.seq_len, parse_recompute(r.train.recompute),
               ModelPlacement{&geometry, &tp, sharding_of(r, groups.gradients().rank()), pipeline.slots, memory},
               std::move(be)),
      model(instance.model),
      backend(*instance.backend),
      engine(model.params(), backend, groups.gradients().for_tensors(backend.device()), bucket_bytes,
             r.parallel.overlap_comm),
      scaler(r.train.precision == "fp16"),
      train_executor(model, groups.pp(), pipeline.train),
      eval_executor(model, groups.pp(), pipeline.eval),
      bad_steps(r.train.max_bad_steps) {
  model.set_param_hooks(&engine);
}

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

StepResult take_step(Run& run, TrainingData& data, const LrScheduleConfig& schedule, std::int64_t step,
                     PhaseTimer& timer, Tracer* trace) {
  const TraceScope step_span(trace, 0, "step", [&] { return fmt::format("step {}", step); });
  const Recipe& recipe = run.recipe;
  const auto& t = recipe.train;
  Backend& be = run.backend;
  ZeroEngine& engine = run.engine;
  const std::int64_t tokens_per_step = t.global_batch * t.seq_len;
  const auto micro_batches = static_cast<std::size_t>(recipe.grad_accum_steps());
  MicroBatches micro(micro_batches);
  {
    const TraceScope span(trace, 0, "data", "data", {{"micro_batches", static_cast<std::int64_t>(micro_batches)}});
    for (std::size_t m = 0; m < micro_batches; ++m) micro.add(data.next_train());
  }
  timer.mark(Phase::data);
  engine.begin_step(static_cast<int>(micro_batches));
  const double loss_scale = run.scaler.scale();
  // The pipeline schedule runs every forward and backward of the step (one stage at pp = 1).
  const PipelineLoss local = run.train_executor.run(be, micro.tokens, t.micro_batch, t.seq_len,
                                                    static_cast<float>(loss_scale / static_cast<double>(tokens_per_step)),
                                                    &timer);
  std::optional<TraceScope> sync_span(std::in_place, trace, 0, "gradient sync", "gradient sync");
  engine.finish_backward();
  sum_partial_grads(run.model.params(), run.groups.tp());
  if (recipe.model.tied_embeddings) sum_tied_grads(run.model.params(), run.groups.embedding());
  // The last pipeline stage holds the losses (each of its tensor-parallel ranks all of them).
  // (The test hook poisons this rank's share.)
  const double loss_sum = run.groups.loss().sum(run.bad_steps.loss(step, local.sum));
  sync_span.reset();
  timer.mark(Phase::backward);
  const TraceScope optimizer_span(trace, 0, "optimizer", "optimizer");
  StepResult r{loss_sum / static_cast<double>(tokens_per_step), 0.0, lr_at(schedule, step)};
  const double scaled_sum_of_squares = grad_sum_of_squares(run.model.params(), be, run.groups.world());
  if (NonfiniteSteps::bad(r.loss, scaled_sum_of_squares, run.scaler.enabled())) {
    r.grad_norm = std::sqrt(scaled_sum_of_squares) / loss_scale;
    r.applied = false;
    r.nonfinite = true;
    timer.mark(Phase::optimizer);
    return r;
  }
  if (!run.scaler.update(std::isfinite(scaled_sum_of_squares), step)) {
    spdlog::warn("step {}: fp16 gradients overflowed at loss scale {}; skipped the update, the scale is now {}", step,
                 loss_scale, run.scaler.scale());
    r.grad_norm = std::nan("");
    r.applied = false;
    timer.mark(Phase::optimizer);
    return r;
  }
  r.grad_norm = std::sqrt(scaled_sum_of_squares) / loss_scale;
  double factor = 1.0 / loss_scale;
  if (t.grad_clip > 0 && r.grad_norm > t.grad_clip) factor *= t.grad_clip / (r.grad_norm + 1e-6);
  if (factor != 1.0) engine.scale_grads(static_cast<float>(factor));
  engine.optimizer_step(AdamWParams{static_cast<float>(r.lr), static_cast<float>(recipe.optim.beta1),
                                    static_cast<float>(recipe.optim.beta2), static_cast<float>(recipe.optim.eps),
                                    static_cast<float>(recipe.optim.weight_decay), step});
  be.synchronize();
  timer.mark(Phase::optimizer);
  return r;
}

double validation_pass(Run& run, TrainingData& data) {
  const auto& t = run.recipe.train;
  const auto micro_batches = static_cast<std::size_t>(run.pipeline.eval.shape.micro_batches);
  data.reset_validation();
  MicroBatches micro(micro_batches);
  for (std::size_t m = 0; m < micro_batches; ++m) micro.add(data.next_validation());
  const PipelineLoss local = run.eval_executor.run(run.backend, micro.tokens, t.micro_batch, t.seq_len, 0.0f);
  return run.groups.loss().sum(local.sum) / run.groups.loss().sum(local.tokens);
}

}  // namespace ustrain
