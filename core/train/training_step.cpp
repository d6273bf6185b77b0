#include "core/train/training_step.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <optional>

#include "core/distributed/gradient_sync.h"
#include "core/distributed/replica_check.h"
#include "core/train/fp8_layers.h"
#include "core/train/optimizer_choice.h"
#include "core/train/router_balance.h"
#include "kernels/fp8/fp8_layers.h"

namespace ustrain {

ModelGeometry geometry_of(const Recipe& r, int tp_rank, int pp_rank, int cp_rank, int ep_rank) {
  const auto& p = r.parallel;
  ModelGeometry g = ModelGeometry::of(r.model,
                                      ModelSplit{static_cast<int>(p.tp), tp_rank, p.sp, static_cast<int>(p.pp),
                                                 pp_rank, static_cast<int>(p.virtual_stages), static_cast<int>(p.cp),
                                                 cp_rank, static_cast<int>(p.ep), ep_rank, p.ep_capacity_factor},
                                      r.train.seq_len);
  g.documents = r.train.document_mask;
  return g;
}

// Document ids a micro-batch carries: those of its whole windows (kernels/token_batch.h), or none.
static std::int64_t document_ids(const Recipe& r, const ModelGeometry& geometry) {
  return geometry.documents ? r.train.micro_batch * r.train.seq_len : 0;
}

ParamShardings sharding_of(const Recipe& r, int rank, int expert_rank, int replica) {
  const auto& p = r.parallel;
  const auto zero = static_cast<int>(p.zero);
  return {ParamSharding{static_cast<int>(p.shard_dp() * p.cp), rank, zero, replica},
          ParamSharding{static_cast<int>(p.dp * p.cp / p.ep), expert_rank, zero}};
}

ParamShardings sharding_of(const Recipe& r, ProcessGroups& groups) {
  ParamShardings s =
      sharding_of(r, groups.dp_shard().rank(), groups.expert_gradients().rank(), groups.dp_replicate().rank());
  s.dense.parts = groups.dp_shard().size();
  return s;
}

TrainingRank::TrainingRank(const Recipe& r, ProcessGroups& g, std::unique_ptr<Backend> be, std::size_t bucket_bytes,
                           MemoryShare memory, bool saves_checkpoints, std::size_t op_scratch_bytes)
    : recipe(r),
      groups(g),
      geometry(geometry_of(r, groups.tp().rank(), groups.pp().rank(), groups.cp().rank(), groups.ep().rank())),
      tp(groups.tp().for_tensors(be->device()), r.parallel.sp, VocabShard{geometry.vocab_begin, geometry.vocab_valid}),
      cp(groups.cp().for_tensors(be->device())),
      ep(groups.ep().host(), groups.ep().for_tensors(be->device()), groups.tp().for_tensors(be->device()),
         static_cast<int>(std::max<std::int64_t>(1, r.model.n_experts))),
      pipeline(plan_pipeline(r, groups.pp().rank())),
      instance(r, geometry, r.train.micro_batch, parse_recompute(r.train.recompute),
               ModelPlacement{LayerParallel{tp, cp, ep},
                              sharding_of(r, groups),
                              pipeline.slots, memory, saves_checkpoints, op_scratch_bytes},
               std::move(be)),
      model(instance.model),
      backend(*instance.backend),
      engine(model.params(), backend, [this](SyncGroup g) -> Communicator& { return sync_comm(g); },
             [this](SyncGroup g) { return replicate_comm(g); }, bucket_bytes, r.parallel.overlap_comm),
      optimizer(make_optimizer(r, backend, model.params(), *instance.memory, groups.tp().for_tensors(backend.device()))),
      scaler(r.train.precision == "fp16", r.train.loss_scale_init, r.train.loss_scale_growth_interval),
      train_executor(model, groups.pp(), pipeline.train),
      eval_executor(model, groups.pp(), pipeline.eval),
      bad_steps(r.train.max_bad_steps),
      faults(InjectedFaults::from_environment()),
      train_tokens(backend, static_cast<std::size_t>(r.grad_accum_steps()), r.train.micro_batch * geometry.seq,
                   "the training micro-batches' token ids", document_ids(r, geometry)),
      eval_tokens(backend, static_cast<std::size_t>(pipeline.eval.shape.micro_batches),
                  r.train.micro_batch * geometry.seq, "the validation micro-batches' token ids",
                  document_ids(r, geometry)) {
  model.set_param_hooks(&engine);
}

Communicator& TrainingRank::sync_comm(SyncGroup g) {
  return (g == SyncGroup::dense ? groups.dp_shard() : groups.expert_gradients()).for_tensors(backend.device());
}

// The distinct communicators data_parallel_volume() adds up: without hybrid sharding the block is
// the gradients group and the replicate group one rank (nothing sent).
static std::vector<Communicator*> data_parallel_comms(TrainingRank& run) {
  std::vector<Communicator*> out{&run.gradient_comm(), &run.expert_gradient_comm()};
  if (&run.dp_shard_comm() != &run.gradient_comm()) out.push_back(&run.dp_shard_comm());
  out.push_back(&run.dp_replicate_comm());
  return out;
}

CommVolume TrainingRank::data_parallel_volume() {
  CommVolume v;
  for (Communicator* c : data_parallel_comms(*this)) v += c->volume();
  return v;
}

void TrainingRank::reset_data_parallel_volume() {
  for (Communicator* c : data_parallel_comms(*this)) c->reset_volume();
}

Communicator* TrainingRank::replicate_comm(SyncGroup g) {
  if (g != SyncGroup::dense || groups.dp_replicate().size() == 1) return nullptr;
  return &groups.dp_replicate().for_tensors(backend.device());
}

namespace {

// train.replica_check_grads: on the replica check's steps, the reduced gradients compared over
// their replicas before the update uses them (after the test hook's flip, if any).
void check_reduced_gradients(TrainingRank& run, std::int64_t step, Tracer* trace) {
  const TrainSection& t = run.recipe.train;
  run.faults.after_reduction(step, run.groups.world().rank(), run.model.params(), run.backend);
  const ReplicaCheck check(t.replica_check_interval);
  if (!run.checks_gradient_replicas || !check.due(step)) return;
  const TraceScope span(trace, 0, "replica check", "replica check of the gradients");
  check.verify(step, run.model.params(), run.backend, run.groups, ReplicaSubject::gradients);
}

}  // namespace

StepResult train_step(TrainingRank& run, std::span<const TokenBatch> micro, const LrScheduleConfig& schedule,
                      std::int64_t step, PhaseTimer& timer, Tracer* trace) {
  const Recipe& recipe = run.recipe;
  const auto& t = recipe.train;
  Backend& be = run.backend;
  ParamEngines& engine = run.engine;
  const std::int64_t tokens_per_step = t.global_batch * t.seq_len;
  engine.begin_step(static_cast<int>(micro.size()));
  if (fp8::Fp8Layers* layers = be.fp8_layers()) layers->begin_step();  // amaxes of validation passes do not count
  const double loss_scale = run.scaler.scale();
  // The pipeline schedule runs every forward and backward of the step (one stage at pp = 1).
  const PipelineLoss local = run.train_executor.run(be, micro, t.micro_batch, run.geometry.seq,
                                                    static_cast<float>(loss_scale / static_cast<double>(tokens_per_step)),
                                                    &timer);
  std::optional<TraceScope> sync_span(std::in_place, trace, 0, "gradient sync", "gradient sync");
  engine.finish_backward();
  sum_partial_grads(run.model.params(), run.groups.tp());
  if (recipe.model.tied_embeddings) sum_tied_grads(run.model.params(), run.groups.embedding());
  check_reduced_gradients(run, step, trace);
  // The last pipeline stage holds the losses (each of its tensor-parallel ranks all of them).
  // (The test hook poisons this rank's share.)
  const double loss_sum = run.groups.loss().sum(run.bad_steps.loss(step, local.sum));
  end_fp8_step(be, run.groups);  // the step's amaxes into the delayed-scaling histories
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
  // The optimizer scales the gradients as it reads them (no pass of its own).
  engine.optimizer_step(*run.optimizer, OptimizerStep{static_cast<float>(r.lr), step, static_cast<float>(factor)});
  if (recipe.model.router_bias_update_rate > 0)  // with the step's load over the whole global batch
    balance_router_biases(run.model, run.groups.gradients().host(), recipe.model.router_bias_update_rate);
  be.synchronize();
  timer.mark(Phase::optimizer);
  return r;
}

}  // namespace ustrain
