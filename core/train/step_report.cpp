#include "core/train/step_report.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "core/run/resource_usage.h"
#include "core/run/signals.h"
#include "kernels/tensor.h"

namespace ustrain {
namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::max(0.0, seconds) + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

void log_summary(TrainSummary& summary, double total_seconds, std::int64_t tokens_per_step, double flops_per_step,
                 double full_window_flops_per_step) {
  const std::int64_t steps = summary.steps - summary.first_step + 1;
  if (steps <= 0) return;
  const std::int64_t skipped = steps - summary.applied_steps;
  const double busy = summary.phase_seconds[0] + summary.phase_seconds[1] + summary.phase_seconds[2] +
                      summary.phase_seconds[3];
  summary.tokens_per_second = static_cast<double>(tokens_per_step * steps) / busy;
  summary.achieved_flops = flops_per_step * static_cast<double>(steps) / busy;
  summary.achieved_flops_full_window = full_window_flops_per_step * static_cast<double>(steps) / busy;
  spdlog::info("done: {} steps ({} applied, {} skipped) in {} | {:.0f} tok/s | {:.2f} GFLOP/s achieved = {:.1f}% of "
               "the job's {:.2f} GFLOP/s peak ({:.1f}% counting attention as 12 L d S)",
               steps, summary.applied_steps, skipped, format_duration(total_seconds), summary.tokens_per_second,
               summary.achieved_flops / 1e9, 100.0 * summary.achieved_flops / summary.peak_flops,
               summary.peak_flops / 1e9, 100.0 * summary.achieved_flops_full_window / summary.peak_flops);
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

}  // namespace

StepReport::StepReport(const Recipe& recipe, ProcessLayout& layout, TrainingRank& run, const TrainingData& data,
                       const RunPaths& paths, std::int64_t start_step, const PeakCache& peak_cache)
    : recipe_(recipe), layout_(layout), run_(run), start_step_(start_step) {
  const auto& t = recipe.train;
  Backend& be = run.backend;
  const ModelParams& params = run.model.params();
  if (layout.leads())
    metrics_ = std::make_unique<MetricsLog>(paths.run_dir, recipe.log,
                                            paths.resume_from ? std::optional(start_step) : std::nullopt);
  peak_ = device_peak_flops(be, run.model.compute_dtype(), peak_cache);
  tokens_per_step_ = t.global_batch * t.seq_len;
  flops_per_step_ = run.model.flops_per_token(t.seq_len) * static_cast<double>(tokens_per_step_);
  full_window_flops_per_step_ =
      run.model.flops_per_token(t.seq_len, /*full_window=*/true) * static_cast<double>(tokens_per_step_);
  const bool masked = recipe.model.sliding_window > 0 || t.document_mask;
  done_flops_per_step_ =
      masked ? run.model.flops_per_token(0) * static_cast<double>(tokens_per_step_) : flops_per_step_;
  psi_bytes_ = 4.0 * static_cast<double>(params.flat_size());

  const ModelGeometry& g = run.geometry;
  const std::string experts =
      g.n_experts == 0 ? ""
                       : fmt::format(" | experts: top-{} of {} (width {}), {:.2f} M parameters active per token",
                                     g.top_k, g.n_experts, g.expert_ffn, static_cast<double>(g.matmul_params()) / 1e6);
  spdlog::info("ustrain: {} on {} | {:.2f} M parameters | {} layers, d_model {}, {} heads ({} kv), ffn {}{}",
               recipe.run.name, be.name(), static_cast<double>(run.model.params().count()) / 1e6,
               recipe.model.n_layers, recipe.model.d_model, recipe.model.n_heads, recipe.model.n_kv_heads,
               recipe.model.ffn_hidden, experts);
  std::string plan_text = run.instance.plan.summary();
  if (!plan_text.empty() && plan_text.back() == '\n') plan_text.pop_back();
  spdlog::info("{}", plan_text);
  spdlog::info("data: {} train tokens, {} validation tokens; {} tokens per step ({} data-parallel ranks x {} x {} "
               "x {} accumulation)",
               data.train_tokens(), data.validation_tokens(), t.global_batch * t.seq_len, layout.data_readers(),
               t.micro_batch, t.seq_len, recipe.grad_accum_steps());
  spdlog::info("MFU is relative to {}: {:.1f} GFLOP/s{}", peak_.source, peak_.flops_per_second / 1e9,
               t.precision == "fp8" ? " (fp8: the bf16 peak; this CPU has no FP8 GEMMs, it emulates them)" : "");

  summary_.steps = start_step;
  summary_.first_step = start_step + 1;
  scale_at_start_ = run.scaler.scale();
  // On the CPU the host buffers (the checkpoint snapshot) are resident beside the arenas.
  summary_.plan_bytes =
      run.instance.plan.total_bytes() + (be.device() == Device::cpu ? run.instance.plan.host_bytes() : 0);
  summary_.peak_flops = peak_.flops_per_second * layout.world_size();  // all devices of the job
  summary_.unigram_val_loss = data.unigram_validation_loss();
  summary_.val_loss = std::nan("");
  if (data.validation_tokens() > 0)
    spdlog::info("unigram baseline on the validation split: {:.4f} nats/token", summary_.unigram_val_loss);
  if (paths.resume_from) summary_.checkpoint = *paths.resume_from;
}

void StepReport::log_parallelism() const {
  const Recipe& recipe = recipe_;
  const TrainingRank& run = run_;
  if (recipe.parallel.dp > 1)
    spdlog::info("data parallelism: {} ranks, ZeRO stage {}", recipe.parallel.dp, recipe.parallel.zero);
  else if (recipe.parallel.zero > 0)
    spdlog::info("parallel.zero = {} shards nothing with one data-parallel rank", recipe.parallel.zero);
  if (recipe.parallel.ep > 1)
    spdlog::info("expert parallelism: {} ranks; each holds {} of the {} experts of every MoE layer and receives at "
                 "most {} rows per dispatch round (parallel.ep_capacity_factor = {})",
                 recipe.parallel.ep, run.geometry.experts_local, run.geometry.n_experts,
                 run.geometry.dispatch_capacity(recipe.train.micro_batch), recipe.parallel.ep_capacity_factor);
  if (recipe.parallel.tp > 1)
    spdlog::info("tensor parallelism: {} ranks{}; each holds {} of {} heads, {} of {} MLP units, {} vocabulary rows",
                 recipe.parallel.tp, run.geometry.sequence_parallel() ? " with sequence parallelism" : "",
                 run.geometry.heads, run.geometry.n_heads, run.geometry.ffn_local, run.geometry.ffn,
                 run.geometry.vocab_local);
}

void StepReport::begin_step() {
  TrainingRank& run = run_;
  run.reset_data_parallel_volume();
  run.tp_comm().reset_volume();
  run.pp_comm().reset_volume();
  run.cp_comm().reset_volume();
  run.ep_comm().reset_volume();
  run.groups.ep().host().reset_volume();
  run.tp.reset_comm_seconds();
  run.cp.reset_wait_seconds();
  run.model.reset_moe_loads();
  blocked_at_step_start_ = run.groups.blocked_seconds();
}

// The expert load of this rank's mixture-of-experts layers over the step, summed over the ranks
// that saw other tokens (dp x cp; tensor-parallel ranks route the same ones): per layer the
// least, most and mean token choices an expert took, the share dropped (0: routing is
// dropless) and the mean squared router log-sum-exp, with the sequence-level balance loss and
// the routing bias's range where they are on, the time spent routing and permuting and (under
// ep) waiting on the dispatch, means over the ranks; and the router z-loss and balance loss of
// the step. A collective: every rank calls it.
void StepReport::record_moe_load(std::int64_t step) {
  const std::vector<const MoeLoad*> loads = run_.model.moe_loads();
  if (loads.empty()) return;
  std::vector<float> sums;
  for (const MoeLoad* l : loads) {
    for (std::int64_t c : l->tokens) sums.push_back(static_cast<float>(c));
    sums.push_back(static_cast<float>(l->rows));
    sums.push_back(static_cast<float>(l->z_sum));
    sums.push_back(static_cast<float>(l->seq_aux_sum));
    sums.push_back(static_cast<float>(l->extra_rounds));
    sums.push_back(static_cast<float>(l->ep_wait_seconds));
    sums.push_back(static_cast<float>(l->routing_seconds));
  }
  const Tensor t(sums.data(), Shape{static_cast<std::int64_t>(sums.size())});
  run_.groups.gradients().host().all_reduce(t).wait();
  std::vector<std::pair<std::string, double>> numbers{{"step", double(step)}};
  const std::vector<const RouterBias*> biases = std::as_const(run_.model).router_biases();
  const bool seq_aux = recipe_.model.router_seq_aux_loss > 0;
  double z_loss = 0, balance_loss = 0, ep_wait_total_ms = 0, routing_total_ms = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < loads.size(); ++i) {
    const MoeLoad* l = loads[i];
    const std::string p = "layer" + std::to_string(l->layer) + "_";
    const auto first = sums.begin() + static_cast<std::ptrdiff_t>(at);
    const auto last = first + static_cast<std::ptrdiff_t>(l->tokens.size());
    const double rows = *last, z = *(last + 1);
    const double seq_balance = *(last + 2) / static_cast<double>(recipe_.train.global_batch);  // mean per sequence
    // Every rank of an ep group counted its rounds: summed over the groups.
    const double extra_rounds = *(last + 3) / static_cast<double>(recipe_.parallel.ep);
    const auto ranks = static_cast<double>(run_.groups.gradients().host().size());
    const double ep_wait_ms = 1e3 * *(last + 4) / ranks, routing_ms = 1e3 * *(last + 5) / ranks;  // means over the ranks
    at += l->tokens.size() + 6;
    double total = 0;
    for (auto c = first; c != last; ++c) total += *c;
    warn_if_starving(step, l->layer, std::span<const float>(&*first, l->tokens.size()));
    numbers.insert(numbers.end(), {{p + "load_min", *std::min_element(first, last)},
                                   {p + "load_max", *std::max_element(first, last)},
                                   {p + "load_mean", total / static_cast<double>(l->tokens.size())},
                                   {p + "dropped", 0.0},
                                   {p + "router_lse_sq", rows > 0 ? z / rows : 0.0},
                                   {p + "routing_ms", routing_ms}});
    routing_total_ms += routing_ms;
    if (rows > 0) z_loss += recipe_.model.router_z_loss * z / rows;
    if (recipe_.parallel.ep > 1) {
      numbers.emplace_back(p + "ep_extra_rounds", extra_rounds);
      numbers.emplace_back(p + "ep_wait_ms", ep_wait_ms);  // mean over the ranks
      ep_wait_total_ms += ep_wait_ms;
    }
    if (seq_aux) {
      numbers.emplace_back(p + "seq_aux_loss", seq_balance);
      balance_loss += seq_balance;
    }
    if (!biases.empty()) {
      const std::vector<float>& b = biases.at(i)->values;
      numbers.emplace_back(p + "bias_min", *std::min_element(b.begin(), b.end()));
      numbers.emplace_back(p + "bias_max", *std::max_element(b.begin(), b.end()));
    }
  }
  numbers.emplace_back("router_z_loss", z_loss);
  numbers.emplace_back("routing_ms", routing_total_ms);
  if (seq_aux) numbers.emplace_back("router_seq_aux_loss", balance_loss);
  if (recipe_.parallel.ep > 1) numbers.emplace_back("ep_wait_ms", ep_wait_total_ms);
  record("moe", numbers);
}

void StepReport::warn_if_starving(std::int64_t step, int layer, std::span<const float> load) {
  StarvingLayer idle;
  if (!starvation_.add_step(layer, load, idle) || !layout_.leads()) return;
  const ModelSection& m = recipe_.model;
  const bool balancing = m.router_bias_update_rate > 0 || m.router_seq_aux_loss > 0;
  spdlog::warn("step {}: MoE layer {}: {} of its {} experts received no token in each of the last {} steps: the "
               "router is collapsing onto the others, which then train alone; {}",
               step, layer, idle.starving, idle.experts, starvation_.patience(),
               balancing ? "raise model.router_bias_update_rate or model.router_seq_aux_loss"
                         : "turn on balancing: model.router_bias_update_rate = 0.001 (auxiliary-loss-free) or "
                           "model.router_seq_aux_loss = 0.0001");
}

void StepReport::record_step(std::int64_t step, const StepResult& r, const PhaseTimer& step_timer) {
  TrainingRank& run = run_;
  for (int p = 0; p < kPhases; ++p) summary_.phase_seconds[p] += step_timer.seconds(static_cast<Phase>(p));
  summary_.last_train_loss = r.loss;
  summary_.steps = step;
  if (r.applied) ++summary_.applied_steps;

  StepNumbers& n = last_;
  // The dense parameters' gradient traffic and the experts' (their own group, even at ep = 1).
  n.dp_bytes = static_cast<double>(run.data_parallel_volume().playbook_bytes());
  n.dp_replicate_bytes = static_cast<double>(run.dp_replicate_comm().volume().playbook_bytes());
  n.tp_bytes = static_cast<double>(run.tp_comm().volume().playbook_bytes());
  n.pp_bytes = static_cast<double>(run.pp_comm().volume().playbook_bytes());
  n.cp_bytes = static_cast<double>(run.cp_comm().volume().playbook_bytes());
  // The dispatch's rows (its device communicator) and counts (host; the same one on the CPU).
  CommVolume ep_volume = run.ep_comm().volume();
  if (&run.ep_comm() != &run.groups.ep().host()) ep_volume += run.groups.ep().host().volume();
  n.ep_bytes = static_cast<double>(ep_volume.playbook_bytes());
  n.ep_a2a_wire = static_cast<double>(ep_volume.all_to_all.wire_bytes);
  n.elapsed = std::chrono::duration<double>(PhaseTimer::Clock::now() - started_).count();
  n.step_s = step_timer.total();
  n.tok_s = static_cast<double>(tokens_per_step_) / n.step_s;
  n.mfu = flops_per_step_ / layout_.world_size() / n.step_s / peak_.flops_per_second;  // per device
  n.mfu_full_window = n.mfu * full_window_flops_per_step_ / flops_per_step_;
  // Under a mask MFU may pass 100% (it counts attention the mask skips): the peak is doubted only
  // when the work the step surely did ran faster than it.
  if (n.mfu * done_flops_per_step_ / flops_per_step_ > 1.0 && !peak_doubted_) {
    peak_doubted_ = true;
    spdlog::warn("MFU {:.0f}%: this step ran faster than the peak MFU divides by ({}: {:.1f} GFLOP/s), so that "
                 "peak is too low, most likely measured while the machine was busy; `ustrain train --measure-peak` "
                 "on a quiet machine measures and keeps it again",
                 100.0 * n.mfu, peak_.source, peak_.flops_per_second / 1e9);
  }
  std::vector<std::pair<std::string, double>> numbers{
      {"step", double(step)}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
      {"tokens_per_s", n.tok_s}, {"mfu", n.mfu},
      {"mfu_full_window", n.mfu_full_window}, {"step_s", n.step_s},
      {"data_s", step_timer.seconds(Phase::data)},
      {"forward_s", step_timer.seconds(Phase::forward)},
      {"backward_s", step_timer.seconds(Phase::backward)},
      {"optimizer_s", step_timer.seconds(Phase::optimizer)},
      {"grad_reduce_wait_s", run.engine.exposed_reduce_seconds()},
      {"param_gather_wait_s", run.engine.exposed_gather_seconds()},
      {"dp_comm_bytes", n.dp_bytes}, {"dp_comm_psi", n.dp_bytes / psi_bytes_},
      {"dp_replicate_comm_bytes", n.dp_replicate_bytes},
      {"tp_comm_bytes", n.tp_bytes}, {"tp_comm_s", run.tp.comm_seconds()},
      {"pp_comm_bytes", n.pp_bytes}, {"pp_wait_s", run.train_executor.wait_seconds()},
      {"cp_comm_bytes", n.cp_bytes}, {"cp_wait_s", run.cp.block_wait_seconds()},
      {"cp_sum_wait_s", run.cp.sum_wait_seconds()},
      {"ep_comm_bytes", n.ep_bytes}, {"ep_a2a_wire_bytes", n.ep_a2a_wire},
      {"loss_scale", run.scaler.scale()}, {"step_applied", r.applied ? 1.0 : 0.0},
      {"nonfinite_steps", double(run.bad_steps.total())},
      {"nonfinite_in_a_row", double(run.bad_steps.in_a_row())},
      {"peak_memory_bytes", double(peak_memory_bytes())}};
  for (auto& field : watch_stragglers(step, n.step_s)) numbers.push_back(std::move(field));
  record("train", numbers);
  record_moe_load(step);
}

std::vector<std::pair<std::string, double>> StepReport::watch_stragglers(std::int64_t step, double step_s) {
  stragglers_.add_step(step_s, run_.groups.blocked_seconds() - blocked_at_step_start_);
  straggler_.reset();
  const std::int64_t interval = recipe_.log.interval;
  if (interval <= 0 || step % interval != 0) return {};
  straggler_ = stragglers_.compare(run_.groups.world());  // collective: every rank, every log interval
  if (!straggler_) return {};
  const Straggler& s = *straggler_;
  if (layout_.leads())
    spdlog::warn("step {}: rank {} is a straggler: it computed {:.1f} ms a step longer than the median rank ({:.0f}% "
                 "of a {:.1f} ms step) for the last {} log intervals, and the other ranks wait for it in every "
                 "collective; check its node (clocks, temperature, other jobs)",
                 step, s.rank, s.lag_ms, 100.0 * s.lag_ms / s.step_ms, s.step_ms, s.intervals);
  return {{"straggler_rank", double(s.rank)}, {"straggler_lag_ms", s.lag_ms}};
}

void StepReport::log_step(std::int64_t step, const StepResult& r, const PhaseTimer& step_timer) const {
  const Recipe& recipe = recipe_;
  const auto& t = recipe.train;
  const TrainingRank& run = run_;
  const StepNumbers& n = last_;
  if (step == summary_.first_step && recipe.parallel.dp > 1)
    spdlog::info("data-parallel traffic per step: {} = {:.2f} x the fp32 parameters (Psi = {}), counted by the "
                 "communicator",
                 format_bytes(static_cast<std::size_t>(n.dp_bytes)), n.dp_bytes / psi_bytes_,
                 format_bytes(static_cast<std::size_t>(psi_bytes_)));
  if (step == summary_.first_step && recipe.parallel.tp > 1)
    spdlog::info("tensor-parallel traffic per step: {} (this rank's tp group, counted by the communicator)",
                 format_bytes(static_cast<std::size_t>(n.tp_bytes)));
  if (step == summary_.first_step && recipe.parallel.cp > 1)
    spdlog::info("context-parallel ring: sent {} in the step; waited {:.1f} ms ({:.1f}% of the step) for key/value "
                 "blocks the attention did not hide and {:.1f} ms for gradient sums",
                 format_bytes(static_cast<std::size_t>(n.cp_bytes)), 1e3 * run.cp.block_wait_seconds(),
                 100.0 * run.cp.block_wait_seconds() / n.step_s, 1e3 * run.cp.sum_wait_seconds());
  if (step == summary_.first_step && recipe.parallel.pp > 1)
    spdlog::info("pipeline rank 0: waited {:.1f} ms ({:.1f}% of the step) for activations and gradients, sent {}; "
                 "activation slots per chunk at most {} (planned {})",
                 1e3 * run.train_executor.wait_seconds(), 100.0 * run.train_executor.wait_seconds() / n.step_s,
                 format_bytes(static_cast<std::size_t>(n.pp_bytes)), fmt::join(run.train_executor.peak_slots(), ", "),
                 fmt::join(run.pipeline.slots.slots, ", "));
  if (step % recipe.log.interval == 0 || step == summary_.first_step || step == t.steps) {
    const double eta = n.elapsed / static_cast<double>(step - start_step_) * static_cast<double>(t.steps - step);
    spdlog::info("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | MFU {:.1f}% "
                 "({:.1f}% at 12LdS) | data {:.1f} ms | elapsed {} | eta {}",
                 step, std::to_string(t.steps).size(), t.steps, r.loss, r.lr, r.grad_norm, n.tok_s, 100.0 * n.mfu,
                 100.0 * n.mfu_full_window, 1e3 * step_timer.seconds(Phase::data), format_duration(n.elapsed),
                 format_duration(eta));
  }
}

void StepReport::validation(std::int64_t step, double val_loss) {
  summary_.val_loss = val_loss;
  spdlog::info("eval step {} | validation loss {:.4f} (unigram baseline {:.4f})", step, summary_.val_loss,
               summary_.unigram_val_loss);
  record("eval", {{"step", double(step)}, {"val_loss", summary_.val_loss},
                  {"unigram_val_loss", summary_.unigram_val_loss}});
}

void StepReport::task_scores(std::int64_t step, const std::vector<std::pair<std::string, TaskScore>>& scores) {
  std::vector<std::pair<std::string, double>> numbers{{"step", double(step)}};
  for (const auto& [name, s] : scores) {
    spdlog::info("eval step {} | task {}: acc {:.4f} | acc_norm {:.4f} | {} items", step, name, s.acc, s.acc_norm, s.n);
    numbers.insert(numbers.end(), {{name + "/acc", s.acc}, {name + "/acc_norm", s.acc_norm}});
  }
  record("task", numbers);
}

void StepReport::checkpoint_saved(std::int64_t step, std::optional<double> stall, const std::string& path,
                                  std::uint64_t state_bytes) {
  if (metrics_) metrics_->sync();  // the steps this checkpoint holds stay logged
  if (!stall) return;              // this step's checkpoint exists already
  summary_.checkpoint_stall_seconds += *stall;
  summary_.checkpoint = path;
  spdlog::info("checkpoint step {}: training paused {:.3f} s {} {}", step, *stall,
               recipe_.checkpoint.async ? "to copy" : "to copy and write", format_bytes(state_bytes));
}

void StepReport::stopped_by(int signal) {
  summary_.stop_signal = signal;
  spdlog::warn("stopped by {} after step {}{}; run the same command with --resume auto to continue (exit "
               "status {})",
               StopSignals::name(summary_.stop_signal), summary_.steps,
               summary_.checkpoint.empty() ? "" : ", checkpoint " + summary_.checkpoint, kExitStopped);
}

TrainSummary StepReport::finish() {
  summary_.peak_resident_bytes = peak_resident_bytes();
  summary_.peak_device_bytes = run_.backend.peak_device_bytes();
  log_summary(summary_, std::chrono::duration<double>(PhaseTimer::Clock::now() - started_).count(),
              tokens_per_step_, flops_per_step_, full_window_flops_per_step_);
  spdlog::info("checkpoint: {}{}", summary_.checkpoint.empty() ? "none written" : summary_.checkpoint,
               metrics_ && !metrics_->files().empty() ? " | metrics: " + metrics_->files() : std::string());
  return summary_;
}

AppliedSteps StepReport::applied_steps(bool resumed) const {
  return {summary_.first_step, summary_.steps, summary_.applied_steps, run_.scaler.skipped_steps(),
          run_.bad_steps.total(), scale_at_start_, run_.scaler.scale(), resumed};
}

std::size_t StepReport::peak_memory_bytes() const {
  if (!metrics_) return 0;  // only the leading rank writes metrics: no need to read /proc elsewhere
  const std::size_t device = run_.backend.peak_device_bytes();
  return device > 0 ? device : peak_resident_bytes();
}

void StepReport::record(const char* kind, const std::vector<std::pair<std::string, double>>& numbers) {
  if (metrics_) metrics_->write(kind, numbers);
}

}  // namespace ustrain
