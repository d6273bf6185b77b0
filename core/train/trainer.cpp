#include "core/train/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "core/checkpoint/locate.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/resume.h"
#include "core/checkpoint/writer.h"
#include "core/tools/eval.h"
#include "core/train/loss_scaler.h"
#include "core/train/lr_schedule.h"
#include "core/memory/memory_fit.h"
#include "core/train/metrics_log.h"
#include "core/train/model_instance.h"
#include "core/train/nonfinite_steps.h"
#include "core/train/peak_flops.h"
#include "core/train/phase_timer.h"
#include "core/distributed/fail_together.h"
#include "core/distributed/gradient_sync.h"
#include "core/distributed/pipeline_executor.h"
#include "core/distributed/pipeline_plan.h"
#include "core/distributed/process_layout.h"
#include "core/run/build_info.h"
#include "core/recipe/recipe_defaults.h"
#include "core/run/run_start.h"
#include "core/run/resource_usage.h"
#include "core/run/run_record.h"
#include "core/run/run_schedule.h"
#include "core/run/signals.h"
#include "core/trace/step_trace.h"
#include "core/train/training_data.h"
#include "core/distributed/zero_engine.h"
#include "kernels/cpu/host_memory.h"

namespace ustrain {
namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::max(0.0, seconds) + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

// The model's sizes on tensor-parallel rank `tp_rank` and pipeline rank `pp_rank` of the
// recipe's layout.
ModelGeometry geometry_of(const Recipe& r, int tp_rank, int pp_rank) {
  const auto& p = r.parallel;
  return ModelGeometry::of(r.model, ModelSplit{static_cast<int>(p.tp), tp_rank, p.sp, static_cast<int>(p.pp), pp_rank,
                                               static_cast<int>(p.virtual_stages)});
}

// How gradient-group rank `rank` of the recipe's layout holds the training state (ZeRO
// shards over the ranks whose gradients add up: dp, times cp once it exists).
ParamSharding sharding_of(const Recipe& r, int rank) {
  return ParamSharding{static_cast<int>(r.parallel.dp * r.parallel.cp), rank, static_cast<int>(r.parallel.zero)};
}

// Everything one process needs to train: the recipe, this rank's geometry, tensor-parallel
// layer kinds and pipeline programs, a model instance for its micro-batches holding this
// rank's part of the state, the data-parallel engine that keeps the ranks' parts consistent,
// and the executors that run the programs.
struct Run {
  const Recipe& recipe;
  ProcessGroups& groups;
  ModelGeometry geometry;
  TensorParallel tp;
  PipelinePlan pipeline;
  ModelInstance instance;
  LlamaModel& model;
  Backend& backend;
  ZeroEngine engine;
  LossScaler scaler;
  PipelineExecutor train_executor, eval_executor;
  NonfiniteSteps bad_steps;
  Run(const Recipe& r, ProcessLayout& layout, std::unique_ptr<Backend> be, std::size_t bucket_bytes,
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
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  // Communicators whose traffic the metrics report.
  Communicator& gradient_comm() { return groups.gradients().for_tensors(backend.device()); }
  Communicator& tp_comm() { return groups.tp().for_tensors(backend.device()); }
  Communicator& pp_comm() { return groups.pp().for_tensors(backend.device()); }
};

struct StepResult {
  double loss, grad_norm, lr;
  bool applied = true;     // false: skipped (fp16 gradients overflowed, or a bad step)
  bool nonfinite = false;  // a bad step: the loss or gradient norm is not finite (core/train/nonfinite_steps.h)
};

// One optimizer step: accumulate gradients over the micro-batches, clip, AdamW.
// In fp16 the loss gradient is scaled up for backward and the gradients scaled back down,
// together with clipping, in one pass (core/train/loss_scaler.h).
// With data parallelism, each rank accumulates its share of the global batch and the ZeRO
// engine reduces the gradients over the group while backward runs (core/distributed/zero_engine.h).
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

// The validation loss (core/tools/eval.h): this rank's share of train.eval_batches global batches,
// forward only through the pipeline, the sums of the losses and their tokens over the loss group.
double validation_pass(Run& run, TrainingData& data) {
  const auto& t = run.recipe.train;
  const auto micro_batches = static_cast<std::size_t>(run.pipeline.eval.shape.micro_batches);
  data.reset_validation();
  MicroBatches micro(micro_batches);
  for (std::size_t m = 0; m < micro_batches; ++m) micro.add(data.next_validation());
  const PipelineLoss local = run.eval_executor.run(run.backend, micro.tokens, t.micro_batch, t.seq_len, 0.0f);
  return run.groups.loss().sum(local.sum) / run.groups.loss().sum(local.tokens);
}

void log_summary(TrainSummary& summary, double total_seconds, std::int64_t tokens_per_step, double flops_per_step) {
  const std::int64_t steps = summary.steps - summary.first_step + 1;
  if (steps <= 0) return;
  const double busy = summary.phase_seconds[0] + summary.phase_seconds[1] + summary.phase_seconds[2] +
                      summary.phase_seconds[3];
  summary.tokens_per_second = static_cast<double>(tokens_per_step * steps) / busy;
  summary.achieved_flops = flops_per_step * static_cast<double>(steps) / busy;
  spdlog::info("done: {} steps in {} | {:.0f} tok/s | {:.2f} GFLOP/s achieved = {:.1f}% of the job's {:.2f} GFLOP/s peak",
               steps, format_duration(total_seconds), summary.tokens_per_second, summary.achieved_flops / 1e9,
               100.0 * summary.achieved_flops / summary.peak_flops, summary.peak_flops / 1e9);
  spdlog::info("time per phase: data {:.1f}% | forward {:.1f}% | backward {:.1f}% | optimizer {:.1f}% | "
               "paused for checkpoints {:.3f} s",
               100 * summary.phase_seconds[0] / busy, 100 * summary.phase_seconds[1] / busy,
               100 * summary.phase_seconds[2] / busy, 100 * summary.phase_seconds[3] / busy,
               summary.checkpoint_stall_seconds);
  if (summary.peak_device_bytes > 0)
    spdlog::info("device memory: plan {} | held at most {} = {:.1f}% of the plan (arenas, op scratch and library "
                 "workspaces)",
                 format_bytes(summary.plan_bytes), format_bytes(summary.peak_device_bytes),
                 100.0 * static_cast<double>(summary.peak_device_bytes) / static_cast<double>(summary.plan_bytes));
  else
    spdlog::info("memory: plan {} | peak resident {} (the rest is code, libraries, the dataset in memory and "
                 "BLAS buffers)",
                 format_bytes(summary.plan_bytes), format_bytes(summary.peak_resident_bytes));
}

// Refuses to start over an old run unless told to replace it; with `writes`, also creates
// the run directory and writes the resolved recipe into it.
void prepare_run_directory(const Recipe& recipe, const TrainOptions& options, const CheckpointDirectory& checkpoints,
                           bool resuming, bool writes) {
  const std::string run_dir = recipe.run_dir();
  const std::string metrics_path = run_dir + "/metrics.jsonl";
  std::error_code ec;
  if (!resuming) {
    const bool held = std::filesystem::exists(metrics_path) || !checkpoints.complete_steps().empty();
    if (held && !options.overwrite && options.resume.empty())
      throw UserError(fmt::format("run directory {} already holds a run; continue it with --resume auto, pick "
                                  "another run.name (--set run.name=NEW) or pass --overwrite to replace it",
                                  run_dir));
    if (!writes) return;
    // A new start (or --resume auto before the first checkpoint) begins the metrics afresh.
    std::filesystem::remove(metrics_path, ec);
    if (options.overwrite) checkpoints.remove_all();
  }
  if (!writes) return;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw UserError(fmt::format("cannot create run directory {}: {}", run_dir, ec.message()));
  std::ofstream out(run_dir + "/recipe.toml");
  out << to_toml(recipe);
  if (!out) throw UserError(fmt::format("cannot write {}/recipe.toml", run_dir));
}

}  // namespace

std::string describe_run(const Recipe& given) {
  DatasetFacts data;
  const ProcessInfo launch = dry_run_launch(given, discover_process());
  const Recipe recipe = with_launch_defaults(with_dataset_defaults(given, &data), launch);
  // Under a launcher the ranks check first that they agree, --dry-run included: one dry rank
  // beside training ones would otherwise leave them waiting for it.
  std::optional<ProcessLayout> agreed;
  if (launch.launcher != "none")
    agreed.emplace(recipe, start_facts(recipe, build_version(), "", "ustrain train --dry-run"));
  check_host_fits(recipe, host_available_bytes(), launch.local_world_size);  // as training checks it
  const ModelGeometry geometry = geometry_of(recipe, 0, 0);
  const LlamaModel model(recipe.model, 1, 1, Recompute::none, DType::f32, &geometry);  // for its sizes
  std::string s = "# resolved recipe\n" + to_toml(recipe) + "\n";
  for (const std::string& filled : filled_defaults(given, recipe)) s += "# " + filled + "\n";
  if (const std::optional<std::string> note = shortened_warmup_note(recipe)) s += "# warning: " + *note + "\n";
  s += fmt::format("# data: {} dataset{} tokenized with {}: {} training and {} validation tokens\n", data.datasets,
                   data.datasets == 1 ? "" : "s", data.tokenizer.describe(), data.train_tokens, data.validation_tokens);
  s += fmt::format("parameters: {} ({:.2f} M); in matrix multiplies: {}\n", model.params().count(),
                   static_cast<double>(model.params().count()) / 1e6, model.matmul_params());
  s += fmt::format("model FLOPs per token: {:.3g} (6 N + 6 L d S at S = {})\n",
                   model.flops_per_token(recipe.train.seq_len), recipe.train.seq_len);
  s += fmt::format("tokens per step: {} ({} data-parallel ranks x {} micro-batches of {} x {})\n",
                   recipe.train.global_batch * recipe.train.seq_len, recipe.parallel.dp,
                   recipe.grad_accum_steps(), recipe.train.micro_batch, recipe.train.seq_len);
  if (recipe.parallel.tp > 1)
    s += fmt::format("tensor parallelism: {} ranks{}; each holds {} of {} heads, {} of {} kv heads, {} of {} MLP "
                     "units and {} vocabulary rows (the vocabulary padded to {})\n",
                     recipe.parallel.tp, geometry.sequence_parallel() ? " with sequence parallelism" : "",
                     geometry.heads, geometry.n_heads, geometry.kv_heads, geometry.n_kv_heads, geometry.ffn_local,
                     geometry.ffn, geometry.vocab_local, geometry.vocab_padded);
  if (recipe.parallel.dp > 1)
    s += fmt::format("ZeRO stage {} over {} data-parallel ranks\n", recipe.parallel.zero, recipe.parallel.dp);
  // One memory plan per pipeline rank (tensor- and data-parallel rank 0 of each).
  const auto pp = static_cast<int>(recipe.parallel.pp);
  const PipelinePlan first = plan_pipeline(recipe, 0);
  if (pp > 1)
    s += fmt::format("pipeline parallelism: {} ranks x {} chunk(s), {} schedule, {} micro-batches per step: bubble "
                     "{:.3f} of the compute time (simulated with equal costs per action)\n",
                     pp, recipe.parallel.virtual_stages, recipe.parallel.pp_schedule,
                     first.train.shape.micro_batches, first.train_simulation.bubble);
  for (int r = 0; r < pp; ++r) {
    const ModelGeometry g = geometry_of(recipe, 0, r);
    const PipelinePlan pipeline = plan_pipeline(recipe, r);
    LlamaModel stage(recipe.model, recipe.train.micro_batch, recipe.train.seq_len,
                     parse_recompute(recipe.train.recompute), compute_dtype(recipe), &g);
    MemoryPlan plan;
    plan_model(stage, plan, sharding_of(recipe, 0), pipeline.slots);
    if (pp > 1) {
      std::vector<std::string> chunks;
      for (std::size_t c = 0; c < g.chunks.size(); ++c) {
        const ChunkSpan& span = g.chunks[c];
        const std::string layers = span.end_layer - span.first_layer == 1
                                       ? fmt::format("layer {}", span.first_layer)
                                       : fmt::format("layers {}-{}", span.first_layer, span.end_layer - 1);
        chunks.push_back(fmt::format("stage {}: {}{}{}, {} activation slot(s)", span.stage, layers,
                                     span.embedding ? " + embedding" : "",
                                     span.head ? " + final norm, head and loss" : "", pipeline.slots.slots[c]));
      }
      s += fmt::format("\npipeline rank {}: {}; peak in-flight micro-batch activations {} (one per micro-batch and "
                       "chunk)\n",
                       r, fmt::join(chunks, "; "), pipeline.train_simulation.peak_slots[static_cast<std::size_t>(r)]);
    }
    if (recipe.parallel.dp * recipe.parallel.tp * recipe.parallel.pp > 1)
      s += fmt::format("the memory plan below is one rank's (pipeline rank {}, data- and tensor-parallel rank 0)\n", r);
    s += plan.summary();
  }
  if (pp > 1) s += "\n" + draw_pipeline_timeline(first.train);
  return s;
}

namespace {

// What train() learns before training: the launch, the host's memory before any rank
// allocated, the defaults it filled in, and the run directory's record of the session.
struct TrainStart {
  ProcessInfo launch;
  std::size_t host_memory = 0;
  std::vector<std::string> filled;
  RunRecord& record;
};

TrainSummary train_resolved(const Recipe& recipe, const TrainOptions& options, TrainStart& ts) {
  const auto& t = recipe.train;
  const std::string run_dir = recipe.run_dir();
  const std::string metrics_path = run_dir + "/metrics.jsonl";
  const CheckpointDirectory checkpoints(run_dir + "/checkpoints");
  std::optional<std::string> resume_from;
  if (!options.resume.empty()) resume_from = find_resume_checkpoint(options.resume, run_dir);
  // Checks the launch against the layout, then that every rank runs the same recipe, build
  // and resume point, before anything else.
  ProcessLayout layout(recipe,
                       start_facts(recipe, options.ustrain_version, resume_from.value_or(""), options.command));
  if (!layout.leads()) spdlog::set_level(spdlog::level::warn);  // one rank reports progress
  if (!options.resume.empty() && !resume_from)
    spdlog::info("no checkpoint in {} yet: starting the run from the beginning", run_dir);
  // From here on SIGTERM, SIGUSR1 and a first SIGINT stop training at the next step boundary.
  const StopSignals signals;

  // This rank's share of the host's memory, before the data or the model takes any.
  check_host_fits(recipe, ts.host_memory, ts.launch.local_world_size);
  // Opens and checks the dataset before anything is allocated; the ranks of one tensor-
  // parallel group read the same part.
  TrainingData data(recipe, layout.data_reader(), layout.data_readers());
  // The device and its memory next (a missing GPU or too little memory is reported before
  // anything is written). Buckets of a few MiB: small enough that most of the reduction
  // overlaps backward on the models a CPU trains, large enough that per-message latency does
  // not dominate.
  constexpr std::size_t kBucketBytes = std::size_t{4} << 20;
  std::unique_ptr<Backend> device = make_recipe_backend(recipe, layout.local_rank());
  if (device->device() == Device::cuda)
    layout.groups().attach_devices({layout.local_rank(), device->compute_stream()}, layout.comm_options());
  const MemoryShare memory = memory_share(device->device(), ts.host_memory, ts.launch.local_world_size);
  // log.trace_steps: declared before the run, whose operations in flight it may still record.
  StepTrace trace(recipe, layout.groups(), layout.mesh());
  Run run(recipe, layout, std::move(device), kBucketBytes, memory);
  trace.attach(run.model, run.engine, run.backend, run.train_executor);
  // Every rank checks the run directory before the leading rank locks and changes it.
  prepare_run_directory(recipe, options, checkpoints, resume_from.has_value(), /*writes=*/false);
  layout.barrier();
  std::optional<RunLock> lock;
  fail_together(layout.groups().world().host(), [&] {
    if (!layout.leads()) return;
    lock = lock_run_directory(run_dir, options.resume, resume_from);
    prepare_run_directory(recipe, options, checkpoints, resume_from.has_value(), /*writes=*/true);
    checkpoints.remove_leftovers();
  });
  ts.record.start({run_dir, !resume_from.has_value(), ts.launch, resume_from.value_or("")},
                  layout.groups().world().host(), layout.leads());
  for (const std::string& filled : ts.filled) spdlog::info("{}", filled);
  Backend& be = run.backend;
  const ParamSet& params = run.model.params();
  ResumedRun start;
  if (resume_from) {
    start = resume_training(*resume_from, recipe, options.force_resume, checkpoints, params, be, data,
                           layout.leads());
    if (layout.leads()) drop_metrics_after(metrics_path, start.step);
    run.scaler.restore(start.loss_scale);
  } else if (!recipe.checkpoint.init_from.empty()) {
    const CheckpointReader initial(locate_checkpoint(recipe.checkpoint.init_from));
    load_model_state(initial, params, be, /*with_optimizer=*/false);
    spdlog::info("initial weights from {} (step {} of the run that wrote it)", initial.dir(), initial.manifest().step);
  } else {
    run.model.initialise(be, recipe.run.seed);
  }
  std::unique_ptr<MetricsLog> metrics;
  if (layout.leads())
    metrics = std::make_unique<MetricsLog>(run_dir, recipe.log, resume_from ? std::optional(start.step) : std::nullopt);
  const auto record = [&](const char* kind, const std::vector<std::pair<std::string, double>>& numbers) {
    if (metrics) metrics->write(kind, numbers);
  };
  const PeakFlops peak = device_peak_flops(be, run.model.compute_dtype());

  spdlog::info("ustrain: {} on {} | {:.2f} M parameters | {} layers, d_model {}, {} heads ({} kv), ffn {}",
               recipe.run.name, be.name(), static_cast<double>(run.model.params().count()) / 1e6,
               recipe.model.n_layers, recipe.model.d_model, recipe.model.n_heads, recipe.model.n_kv_heads,
               recipe.model.ffn_hidden);
  std::string plan_text = run.instance.plan.summary();
  if (!plan_text.empty() && plan_text.back() == '\n') plan_text.pop_back();
  spdlog::info("{}", plan_text);
  spdlog::info("data: {} train tokens, {} validation tokens; {} tokens per step ({} data-parallel ranks x {} x {} "
               "x {} accumulation)",
               data.train_tokens(), data.validation_tokens(), t.global_batch * t.seq_len, layout.data_readers(),
               t.micro_batch, t.seq_len, recipe.grad_accum_steps());
  spdlog::info("MFU is relative to {}: {:.1f} GFLOP/s", peak.source, peak.flops_per_second / 1e9);

  TrainSummary summary;
  summary.steps = start.step;
  summary.first_step = start.step + 1;
  summary.plan_bytes = run.instance.plan.total_bytes();
  summary.peak_flops = peak.flops_per_second * layout.world_size();  // all devices of the job
  summary.unigram_val_loss = data.unigram_validation_loss();
  summary.val_loss = std::nan("");
  if (data.validation_tokens() > 0)
    spdlog::info("unigram baseline on the validation split: {:.4f} nats/token", summary.unigram_val_loss);

  const CheckpointSection& ck = recipe.checkpoint;
  // Every rank saves its chunk of the state; rank 0 also the manifest and the tokenizer.
  auto writer = std::make_unique<CheckpointWriter>(
      CheckpointWriterConfig{checkpoints.root(), ck.keep_last, ck.keep_every, ck.async, to_toml(recipe),
                             options.ustrain_version, be.name(), layout.mesh().shape(), layout.checkpoint_group(),
                             dataset_tokenizer_snapshot(recipe.data)},
      SaveFaults::from_environment());
  writer->prepare(params);
  if (ck.interval > 0 || options.save_final) check_can_save(layout, checkpoints.root(), writer->state_bytes());
  const std::string end = options.save_final ? " and at the end" : "";
  spdlog::info("checkpoints: {} {} | keep the last {}{} | written {} | host snapshot {}", checkpoints.root(),
               ck.interval > 0 ? fmt::format("every {} steps{}", ck.interval, end)
               : options.save_final ? std::string("at the end")
                                    : std::string("none (this run saves no checkpoint)"),
               ck.keep_last, ck.keep_every > 0 ? fmt::format(" and steps that are multiples of {}", ck.keep_every) : std::string(),
               ck.async ? "in the background" : "before training continues", format_bytes(writer->state_bytes()));
  if (recipe.parallel.dp > 1)
    spdlog::info("data parallelism: {} ranks, ZeRO stage {}", recipe.parallel.dp, recipe.parallel.zero);
  else if (recipe.parallel.zero > 0)
    spdlog::info("parallel.zero = {} shards nothing with one data-parallel rank", recipe.parallel.zero);
  if (recipe.parallel.tp > 1)
    spdlog::info("tensor parallelism: {} ranks{}; each holds {} of {} heads, {} of {} MLP units, {} vocabulary rows",
                 recipe.parallel.tp, run.geometry.sequence_parallel() ? " with sequence parallelism" : "",
                 run.geometry.heads, run.geometry.n_heads, run.geometry.ffn_local, run.geometry.ffn,
                 run.geometry.vocab_local);
  TrainingProgress progress{start.step, start.tokens_seen, 0.0, std::nan(""), data.state(), run.scaler.scale()};
  if (resume_from) summary.checkpoint = *resume_from;
  const auto save = [&](bool wait) {
    std::optional<TraceScope> span(std::in_place, trace.tracer(), 0, "checkpoint",
                                   ck.async ? "checkpoint snapshot" : "checkpoint save");
    const std::optional<double> stall = writer->save(params, be, progress);
    span.reset();
    if (metrics) metrics->sync();  // the steps this checkpoint holds stay logged
    if (stall) {  // nullopt: this step's checkpoint exists already
      summary.checkpoint_stall_seconds += *stall;
      summary.checkpoint = checkpoints.path_of(progress.step);
      spdlog::info("checkpoint step {}: training paused {:.3f} s {} {}", progress.step, *stall,
                   ck.async ? "to copy" : "to copy and write", format_bytes(writer->state_bytes()));
    }
    if (wait) {
      const TraceScope wait_span(trace.tracer(), 0, "checkpoint", "checkpoint wait");
      writer->wait();
    }
  };
  if (start.step == t.steps)
    spdlog::info("the run is complete at step {}; raise train.steps to train further", start.step);

  const LrScheduleConfig schedule = schedule_of(recipe);
  if (const std::optional<std::string> note = shortened_warmup_note(recipe)) spdlog::warn("{}", *note);
  const std::int64_t tokens_per_step = t.global_batch * t.seq_len;
  const double flops_per_step = run.model.flops_per_token(t.seq_len) * static_cast<double>(tokens_per_step);

  // Ranks agree on stopping (a signal may reach them at different steps).
  bool stop = run.groups.world().any(signals.requested());
  // The Playbook's unit for data-parallel traffic: one copy of the (padded) fp32 parameters.
  const double psi_bytes = 4.0 * static_cast<double>(params.flat_size());
  const auto started = PhaseTimer::Clock::now();
  for (std::int64_t step = start.step + 1; step <= t.steps && !stop; ++step) {
    trace.begin_step(step);
    PhaseTimer step_timer;
    run.gradient_comm().reset_volume();
    run.tp_comm().reset_volume();
    run.pp_comm().reset_volume();
    run.tp.reset_comm_seconds();
    const StepResult r = take_step(run, data, schedule, step, step_timer, trace.tracer());
    run.bad_steps.count(step, r.nonfinite, r.loss, r.grad_norm);
    for (int p = 0; p < kPhases; ++p) summary.phase_seconds[p] += step_timer.seconds(static_cast<Phase>(p));
    summary.last_train_loss = r.loss;
    summary.steps = step;
    progress = {step, progress.tokens_seen + tokens_per_step, r.lr, r.loss, data.state(), run.scaler.scale()};

    const double dp_bytes = static_cast<double>(run.gradient_comm().volume().playbook_bytes());
    const double tp_bytes = static_cast<double>(run.tp_comm().volume().playbook_bytes());
    const double pp_bytes = static_cast<double>(run.pp_comm().volume().playbook_bytes());
    const double elapsed = std::chrono::duration<double>(PhaseTimer::Clock::now() - started).count();
    const double step_s = step_timer.total();
    const double tok_s = static_cast<double>(tokens_per_step) / step_s;
    const double mfu = flops_per_step / layout.world_size() / step_s / peak.flops_per_second;  // per device
    record("train", {{"step", double(step)}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
                     {"tokens_per_s", tok_s}, {"mfu", mfu}, {"step_s", step_s},
                     {"data_s", step_timer.seconds(Phase::data)},
                     {"forward_s", step_timer.seconds(Phase::forward)},
                     {"backward_s", step_timer.seconds(Phase::backward)},
                     {"optimizer_s", step_timer.seconds(Phase::optimizer)},
                     {"grad_reduce_wait_s", run.engine.exposed_reduce_seconds()},
                     {"param_gather_wait_s", run.engine.exposed_gather_seconds()},
                     {"dp_comm_bytes", dp_bytes}, {"dp_comm_psi", dp_bytes / psi_bytes},
                     {"tp_comm_bytes", tp_bytes}, {"tp_comm_s", run.tp.comm_seconds()},
                     {"pp_comm_bytes", pp_bytes}, {"pp_wait_s", run.train_executor.wait_seconds()},
                     {"loss_scale", run.scaler.scale()}, {"step_applied", r.applied ? 1.0 : 0.0},
                     {"nonfinite_steps", double(run.bad_steps.total())},
                     {"nonfinite_in_a_row", double(run.bad_steps.in_a_row())}});
    run.bad_steps.stop_if_too_many(step);
    if (step == summary.first_step && recipe.parallel.dp > 1)
      spdlog::info("data-parallel traffic per step: {} = {:.2f} x the fp32 parameters (Psi = {}), counted by the "
                   "communicator",
                   format_bytes(static_cast<std::size_t>(dp_bytes)), dp_bytes / psi_bytes,
                   format_bytes(static_cast<std::size_t>(psi_bytes)));
    if (step == summary.first_step && recipe.parallel.tp > 1)
      spdlog::info("tensor-parallel traffic per step: {} (this rank's tp group, counted by the communicator)",
                   format_bytes(static_cast<std::size_t>(tp_bytes)));
    if (step == summary.first_step && recipe.parallel.pp > 1)
      spdlog::info("pipeline rank 0: waited {:.1f} ms ({:.1f}% of the step) for activations and gradients, sent {}; "
                   "activation slots per chunk at most {} (planned {})",
                   1e3 * run.train_executor.wait_seconds(), 100.0 * run.train_executor.wait_seconds() / step_s,
                   format_bytes(static_cast<std::size_t>(pp_bytes)), fmt::join(run.train_executor.peak_slots(), ", "),
                   fmt::join(run.pipeline.slots.slots, ", "));
    if (step % recipe.log.interval == 0 || step == summary.first_step || step == t.steps) {
      const double eta = elapsed / static_cast<double>(step - start.step) * static_cast<double>(t.steps - step);
      spdlog::info("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | MFU {:.1f}% | "
                   "data {:.1f} ms | elapsed {} | eta {}",
                   step, std::to_string(t.steps).size(), t.steps, r.loss, r.lr, r.grad_norm, tok_s, 100.0 * mfu,
                   1e3 * step_timer.seconds(Phase::data), format_duration(elapsed), format_duration(eta));
    }
    if (t.eval_interval > 0 && (step % t.eval_interval == 0 || step == t.steps)) {
      {
        const TraceScope span(trace.tracer(), 0, "validation", "validation");
        summary.val_loss = validation_pass(run, data);
      }
      spdlog::info("eval step {} | validation loss {:.4f} (unigram baseline {:.4f})", step, summary.val_loss,
                   summary.unigram_val_loss);
      record("eval", {{"step", double(step)}, {"val_loss", summary.val_loss},
                      {"unigram_val_loss", summary.unigram_val_loss}});
    }
    stop = run.groups.world().any(signals.requested());
    // No checkpoint while bad steps go on: the newest one stays the last good state.
    if (ck.interval > 0 && step % ck.interval == 0 && step != t.steps && !stop && run.bad_steps.in_a_row() == 0)
      save(/*wait=*/false);
    trace.end_step(step);
  }
  // The last step taken is saved, unless this process took none (a checkpoint holds it already).
  if (summary.steps > start.step && options.save_final) save(/*wait=*/true);
  writer->wait();
  trace.finish();
  if (summary.steps < t.steps && stop) {
    // A rank that stops because a peer was signalled reports the peer's usual signal.
    summary.stop_signal = signals.requested() ? signals.pending() : SIGTERM;
    spdlog::warn("stopped by {} after step {}{}; run the same command with --resume auto to continue (exit "
                 "status {})",
                 StopSignals::name(summary.stop_signal), summary.steps,
                 summary.checkpoint.empty() ? "" : ", checkpoint " + summary.checkpoint, kExitStopped);
  }
  summary.peak_resident_bytes = peak_resident_bytes();
  summary.peak_device_bytes = be.peak_device_bytes();
  log_summary(summary, std::chrono::duration<double>(PhaseTimer::Clock::now() - started).count(),
              tokens_per_step, flops_per_step);
  spdlog::info("checkpoint: {}{}", summary.checkpoint.empty() ? "none written" : summary.checkpoint,
               metrics && !metrics->files().empty() ? " | metrics: " + metrics->files() : std::string());
  return summary;
}

}  // namespace

TrainSummary train(const Recipe& given, const TrainOptions& options) {
  const ProcessInfo launch = discover_process();
  // Measured by every rank before the ranks first wait for each other, so before any allocates.
  const std::size_t host_memory = host_available_bytes();
  const Recipe recipe = resolve_recipe(given, launch);
  RunRecord record;
  TrainStart start{launch, host_memory, filled_defaults(given, recipe), record};
  try {
    TrainSummary summary = train_resolved(recipe, options, start);
    record.finish(summary.stop_signal != 0 ? fmt::format("stopped by {}", StopSignals::name(summary.stop_signal))
                                           : "completed",
                  summary.steps);
    return summary;
  } catch (const std::exception& e) {
    record.finish("error", -1, e.what());
    throw;
  }
}

}  // namespace ustrain
