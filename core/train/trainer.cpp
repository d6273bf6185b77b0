#include "core/train/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>

#include "core/checkpoint/writer.h"
#include "core/distributed/fault_injection.h"
#include "core/distributed/rank_agreement.h"
#include "core/distributed/replica_check.h"
#include "core/recipe/recipe_defaults.h"
#include "core/run/run_record.h"
#include "core/step/run_schedule.h"
#include "core/run/signals.h"
#include "core/monitor/applied_steps.h"
#include "core/monitor/kept_peak.h"
#include "core/step/router_balance.h"
#include "core/train/auto_layout.h"
#include "core/train/run_setup.h"
#include "core/train/step_report.h"
#include "core/train/task_evals.h"
#include "core/train/take_step.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Whether this rank saves the model state it holds: one rank of those that hold the same
// layers (the first of the data-, context- and tensor-parallel ranks of its pipeline stage).
bool saves_model_state(TrainingRank& run) { return run.groups.gradients().rank() == 0 && run.groups.tp().rank() == 0; }

// Saves the state after `progress.step`: in the background with checkpoint.async (training
// pauses only to copy it), and with `wait` until it is on disk.
void save_checkpoint(RunSetup& setup, std::unique_ptr<CheckpointWriter>& writer, StepReport& report,
                     const RunPaths& paths, const TrainingProgress& progress, bool wait) {
  StepTrace& trace = setup.trace;
  Backend& be = setup.run.backend;
  const ModelParams& params = setup.run.model.params();
  const CheckpointSection& ck = setup.run.recipe.checkpoint;
  std::optional<TraceScope> span(std::in_place, trace.tracer(), 0, "checkpoint",
                                 ck.async ? "checkpoint snapshot" : "checkpoint save");
  TrainingProgress saved = progress;
  const ModelState state = model_state_of(setup.run.model, setup.run.backend, saves_model_state(setup.run));
  if (state.saves)
    for (const ModelStateTensor& t : state.held) saved.model_state.emplace_back(t.name, *t.values);
  const std::optional<double> stall = writer->save(params, be, saved);
  span.reset();
  report.checkpoint_saved(progress.step, stall, paths.checkpoints.path_of(progress.step), writer->state_bytes());
  if (wait) {
    const TraceScope wait_span(trace.tracer(), 0, "checkpoint", "checkpoint wait");
    writer->wait();
  }
}

// The validation pass and the [eval] tasks, when due after `step`; this rank reads `share` of the tasks' rows.
void evaluate(RunSetup& setup, StepReport& report, const TaskEvals& tasks, const RowShare& share, std::int64_t step) {
  const auto& t = setup.run.recipe.train;
  Tracer* tracer = setup.trace.tracer();
  if (t.eval_interval > 0 && (step % t.eval_interval == 0 || step == t.steps)) {
    std::optional<TraceScope> span(std::in_place, tracer, 0, "validation", "validation");
    const double val_loss = validation_pass(setup.run, setup.data);
    span.reset();
    report.validation(step, val_loss);
  }
  if (tasks.due(step)) {
    std::optional<TraceScope> span(std::in_place, tracer, 0, "validation", "task evaluation");
    const auto scores = tasks.run(setup.run, share);
    span.reset();
    report.task_scores(step, scores);
  }
}

// The replicas compared every replica_check_interval steps and before every checkpoint, so
// that no checkpoint is written after a corruption the check can see; once per step at most.
class ReplicaChecks {
 public:
  ReplicaChecks(std::int64_t interval, TrainingRank& run, StepTrace& trace) : check_(interval), run_(run), trace_(trace) {}
  bool due(std::int64_t step) const { return check_.due(step); }
  void check(std::int64_t step) {
    if (!check_.enabled() || checked_ == step) return;
    const TraceScope span(trace_.tracer(), 0, "replica check", "replica check");
    check_.verify(step, run_.model.params(), run_.backend, run_.groups);
    checked_ = step;
  }

 private:
  const ReplicaCheck check_;
  TrainingRank& run_;
  StepTrace& trace_;
  std::int64_t checked_ = -1;
};

TrainSummary train_resolved(const Recipe& recipe, const TrainOptions& options, TrainStart& ts) {
  const auto& t = recipe.train;
  const RunPaths paths(recipe, options);
  // Checks the launch against the layout, then that every rank runs the same recipe, build
  // and resume point, before anything else.
  ProcessLayout layout(recipe,
                       start_facts(recipe, options.ustrain_version, paths.resume_from.value_or(""), options.command),
                       std::move(ts.world));
  if (!layout.leads()) spdlog::set_level(spdlog::level::warn);  // one rank reports progress
  if (!options.resume.empty() && !paths.resume_from)
    spdlog::info("no checkpoint in {} yet: starting the run from the beginning", paths.run_dir);
  // From here on SIGTERM, SIGUSR1 and a first SIGINT stop training at the next step boundary.
  const StopSignals signals;
  const TaskEvals tasks(recipe);  // a bad task file fails before the model is built
  RunSetup setup(recipe, options, ts, layout, paths);
  TrainingRank& run = setup.run;
  TrainingData& data = setup.data;
  StepTrace& trace = setup.trace;
  const ResumedRun& start = setup.start;
  StepReport report(recipe, layout, run, data, paths, start.step, PeakCache{kept_peak_path(), options.measure_peak});
  std::unique_ptr<CheckpointWriter> writer = open_checkpoint_writer(recipe, options, layout, paths, run);
  report.log_parallelism();
  TrainingProgress progress{start.step, start.tokens_seen, 0.0, std::nan(""), data.state(), run.scaler.scale(), {}};
  if (start.step == t.steps)
    spdlog::info("the run is complete at step {}; raise train.steps to train further", start.step);
  const LrScheduleConfig schedule = schedule_of(recipe);
  if (const std::optional<std::string> note = shortened_warmup_note(recipe)) spdlog::warn("{}", *note);

  const InjectedFaults& faults = run.faults;
  run.checks_gradient_replicas = t.replica_check_grads;
  const int world_rank = run.groups.world().rank();
  ReplicaChecks replicas(t.replica_check_interval, run, trace);

  // Ranks agree on stopping (a signal may reach them at different steps).
  bool stop = run.groups.world().any(signals.requested());
  report.start_clock();
  for (std::int64_t step = start.step + 1; step <= t.steps && !stop; ++step) {
    trace.begin_step(step);
    PhaseTimer step_timer;
    report.begin_step();
    faults.delay(world_rank);
    const StepResult r = take_step(run, data, schedule, step, step_timer, trace.tracer());
    faults.after_update(step, world_rank, run.model.params(), run.backend);
    run.bad_steps.count(step, r.nonfinite, r.loss, r.grad_norm);
    progress = {step, progress.tokens_seen + report.tokens_per_step(), r.lr, r.loss, data.state(),
                run.scaler.scale(), {}};
    report.record_step(step, r, step_timer);
    if (report.straggler()) trace_straggler(trace.tracer(), *report.straggler());
    run.bad_steps.stop_if_too_many(step, report.summary().checkpoint);
    report.log_step(step, r, step_timer);
    evaluate(setup, report, tasks, RowShare{layout.data_reader(), layout.data_readers(), layout.context()}, step);
    stop = run.groups.world().any(signals.requested());
    // No checkpoint while bad steps go on: the newest one stays the last good state.
    const std::int64_t interval = recipe.checkpoint.interval;
    const bool saves =
        interval > 0 && step % interval == 0 && step != t.steps && !stop && run.bad_steps.in_a_row() == 0;
    if (replicas.due(step) || saves) replicas.check(step);
    if (saves) save_checkpoint(setup, writer, report, paths, progress, /*wait=*/false);
    trace.end_step(step);
  }
  // A run that reached its end without applying any of its steps trained nothing: an error, and
  // no final checkpoint that would look like a trained model.
  const std::optional<std::string> nothing_applied =
      stop ? std::nullopt : no_step_applied(report.applied_steps(paths.resume_from.has_value()));
  // The last step taken is saved, unless this process took none (a checkpoint holds it already).
  if (report.summary().steps > start.step && options.save_final && !nothing_applied) {
    replicas.check(progress.step);
    save_checkpoint(setup, writer, report, paths, progress, /*wait=*/true);
  }
  writer->wait();
  trace.finish();
  if (nothing_applied) throw UserError(*nothing_applied);
  // A rank that stops because a peer was signalled reports the peer's usual signal.
  if (report.summary().steps < t.steps && stop) report.stopped_by(signals.requested() ? signals.pending() : SIGTERM);
  return report.finish();
}

}  // namespace

TrainSummary train(const Recipe& given, const TrainOptions& options) {
  const ProcessInfo launch = discover_process();
  // Measured by every rank before the ranks first wait for each other, so before any allocates.
  const std::size_t host_memory = host_available_bytes();
  LaidOut laid = lay_out(given, launch, launch.world_size, options.set_by_hand, options.overridden);
  const Recipe recipe = resolve_recipe(laid.recipe, launch);
  RunRecord record;
  TrainStart start{launch, host_memory, filled_defaults(laid.recipe, recipe), record, std::move(laid.world), {}};
  if (laid.chosen) {
    start.filled.insert(start.filled.begin(), auto_layout_line(*laid.chosen));
    start.auto_layout = auto_layout_json(*laid.chosen);
  }
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
