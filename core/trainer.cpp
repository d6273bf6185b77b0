#include "core/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/lr_schedule.h"
#include "core/metrics_log.h"
#include "core/model/llama.h"
#include "core/peak_flops.h"
#include "core/phase_timer.h"
#include "core/resource_usage.h"
#include "core/training_data.h"
#include "core/weights_io.h"

namespace ustrain {
namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::max(0.0, seconds) + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

LlamaModel make_model(const Recipe& r) {
  return LlamaModel(r.model, r.train.micro_batch, r.train.seq_len, parse_recompute(r.train.recompute));
}

// Everything one process needs to train: backend, plan, model, memory, data.
struct Run {
  const Recipe& recipe;
  std::unique_ptr<Backend> backend;
  MemoryPlan plan;
  LlamaModel model;
  std::unique_ptr<PlannedMemory> memory;

  explicit Run(const Recipe& r)
      : recipe(r), backend(make_backend(r.device.type == "cuda" ? Device::cuda : Device::cpu,
                                        static_cast<int>(r.device.threads))),
        model(make_model(r)) {
    model.plan(plan);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    model.bind(*memory, *backend);
  }
};

double evaluate(Run& run, TrainingData& data) {
  const auto& t = run.recipe.train;
  data.reset_validation();
  double sum = 0;
  std::int64_t count = 0;
  for (std::int64_t b = 0; b < t.eval_batches; ++b) {
    const MicroBatch& mb = data.next_validation();
    sum += run.model.forward(*run.backend, mb.inputs.data(), mb.targets.data(), t.micro_batch, t.seq_len);
    count += t.micro_batch * t.seq_len;
  }
  return sum / static_cast<double>(count);
}

}  // namespace

std::string describe_run(const Recipe& recipe) {
  LlamaModel model = make_model(recipe);
  MemoryPlan plan;
  model.plan(plan);
  std::string s = "# resolved recipe\n" + to_toml(recipe) + "\n";
  s += fmt::format("parameters: {} ({:.2f} M); in matrix multiplies: {}\n", model.params().count(),
                   static_cast<double>(model.params().count()) / 1e6, model.matmul_params());
  s += fmt::format("model FLOPs per token: {:.3g} (6 N + 6 L d S at S = {})\n",
                   model.flops_per_token(recipe.train.seq_len), recipe.train.seq_len);
  s += fmt::format("tokens per step: {} ({} micro-batches of {} x {})\n",
                   recipe.train.global_batch * recipe.train.seq_len, recipe.grad_accum_steps(),
                   recipe.train.micro_batch, recipe.train.seq_len);
  s += plan.summary();
  return s;
}

TrainSummary train(const Recipe& recipe, const TrainOptions& options) {
  const auto& t = recipe.train;
  const std::string run_dir = recipe.run_dir();
  const std::string metrics_path = run_dir + "/metrics.jsonl";
  const std::string weights_path = run_dir + "/model.h5";
  const bool finished_run = std::filesystem::exists(metrics_path) || std::filesystem::exists(weights_path);
  if (finished_run && !options.overwrite)
    throw UserError(fmt::format("run directory {} already holds a run; pick another run.name "
                                "(--set run.name=NEW) or pass --overwrite to replace it",
                                run_dir));
  TrainingData data(recipe);  // opens and checks the dataset before anything is allocated

  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw UserError(fmt::format("cannot create run directory {}: {}", run_dir, ec.message()));
  if (options.overwrite) std::filesystem::remove(metrics_path, ec);
  {
    std::ofstream out(run_dir + "/recipe.toml");
    out << to_toml(recipe);
    if (!out) throw UserError(fmt::format("cannot write {}/recipe.toml", run_dir));
  }
  std::unique_ptr<MetricsLog> metrics;
  if (recipe.log.jsonl) metrics = std::make_unique<MetricsLog>(metrics_path);
  const auto record = [&](const char* kind, const std::vector<std::pair<std::string, double>>& numbers) {
    if (metrics) metrics->write(kind, numbers);
  };

  Run run(recipe);
  Backend& be = *run.backend;
  run.model.initialise(be, recipe.run.seed);
  const PeakFlops peak = device_peak_flops(be);

  spdlog::info("ustrain: {} on {} | {:.2f} M parameters | {} layers, d_model {}, {} heads ({} kv), ffn {}",
               recipe.run.name, be.name(), static_cast<double>(run.model.params().count()) / 1e6,
               recipe.model.n_layers, recipe.model.d_model, recipe.model.n_heads, recipe.model.n_kv_heads,
               recipe.model.ffn_hidden);
  std::string plan_text = run.plan.summary();
  if (!plan_text.empty() && plan_text.back() == '\n') plan_text.pop_back();
  spdlog::info("{}", plan_text);
  spdlog::info("data: {} train tokens, {} validation tokens; {} tokens per step ({} x {} x {} accumulation)",
               data.train_tokens(), data.validation_tokens(), t.global_batch * t.seq_len, t.micro_batch,
               t.seq_len, recipe.grad_accum_steps());
  spdlog::info("MFU is relative to {}: {:.1f} GFLOP/s", peak.source, peak.flops_per_second / 1e9);

  TrainSummary summary;
  summary.plan_bytes = run.plan.total_bytes();
  summary.peak_flops = peak.flops_per_second;
  summary.unigram_val_loss = data.unigram_validation_loss();
  summary.val_loss = std::nan("");
  if (data.validation_tokens() > 0)
    spdlog::info("unigram baseline on the validation split: {:.4f} nats/token", summary.unigram_val_loss);

  const LrScheduleConfig schedule{recipe.optim.lr, recipe.schedule.min_lr, recipe.schedule.warmup_steps,
                                  t.steps, recipe.schedule.decay, recipe.schedule.wsd_decay_fraction};
  const std::int64_t accum = recipe.grad_accum_steps();
  const std::int64_t tokens_per_step = t.global_batch * t.seq_len;
  const float dloss = 1.0f / static_cast<float>(tokens_per_step);
  const double flops_per_step = run.model.flops_per_token(t.seq_len) * static_cast<double>(tokens_per_step);
  const ParamSet& params = run.model.params();

  const auto start = PhaseTimer::Clock::now();
  for (std::int64_t step = 1; step <= t.steps; ++step) {
    PhaseTimer step_timer;
    be.fill(params.all_grads(), 0.0f);
    double loss_sum = 0;
    for (std::int64_t micro = 0; micro < accum; ++micro) {
      const MicroBatch& mb = data.next_train();
      step_timer.mark(Phase::data);
      loss_sum += run.model.forward(be, mb.inputs.data(), mb.targets.data(), t.micro_batch, t.seq_len);
      step_timer.mark(Phase::forward);
      run.model.backward(be, dloss);
      step_timer.mark(Phase::backward);
    }
    const double loss = loss_sum / static_cast<double>(tokens_per_step);
    if (!std::isfinite(loss))
      throw UserError(fmt::format("the loss became {} at step {}; lower optim.lr or raise schedule.warmup_steps",
                                  loss, step));
    const double grad_norm = std::sqrt(be.sum_of_squares(params.all_grads()));
    if (t.grad_clip > 0 && grad_norm > t.grad_clip)
      be.scale(params.all_grads(), static_cast<float>(t.grad_clip / (grad_norm + 1e-6)));
    const double lr = lr_at(schedule, step);
    for (bool decay : {true, false}) {
      const ParamSet::Group g = params.group(decay);
      if (g.value.empty()) continue;
      AdamWParams p{static_cast<float>(lr), static_cast<float>(recipe.optim.beta1),
                    static_cast<float>(recipe.optim.beta2), static_cast<float>(recipe.optim.eps),
                    decay ? static_cast<float>(recipe.optim.weight_decay) : 0.0f, step};
      be.adamw(g.value, g.grad, g.m, g.v, p);
    }
    be.synchronize();
    step_timer.mark(Phase::optimizer);
    for (int p = 0; p < kPhases; ++p) {
      const double s = step_timer.seconds(static_cast<Phase>(p));
      summary.phase_seconds[p] += s;
    }
    summary.last_train_loss = loss;
    summary.steps = step;

    const double elapsed = std::chrono::duration<double>(PhaseTimer::Clock::now() - start).count();
    const double step_s = step_timer.total();
    const double tok_s = static_cast<double>(tokens_per_step) / step_s;
    const double mfu = flops_per_step / step_s / peak.flops_per_second;
    record("train", {{"step", double(step)}, {"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm},
                            {"tokens_per_s", tok_s}, {"mfu", mfu}, {"step_s", step_s},
                            {"data_s", step_timer.seconds(Phase::data)},
                            {"forward_s", step_timer.seconds(Phase::forward)},
                            {"backward_s", step_timer.seconds(Phase::backward)},
                            {"optimizer_s", step_timer.seconds(Phase::optimizer)}});
    if (step % recipe.log.interval == 0 || step == 1 || step == t.steps) {
      const double eta = elapsed / static_cast<double>(step) * static_cast<double>(t.steps - step);
      spdlog::info("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | MFU {:.1f}% | "
                   "data {:.1f} ms | elapsed {} | eta {}",
                   step, std::to_string(t.steps).size(), t.steps, loss, lr, grad_norm, tok_s, 100.0 * mfu,
                   1e3 * step_timer.seconds(Phase::data), format_duration(elapsed), format_duration(eta));
    }
    const bool eval_now = t.eval_interval > 0 && (step % t.eval_interval == 0 || step == t.steps);
    if (eval_now) {
      summary.val_loss = evaluate(run, data);
      spdlog::info("eval step {} | validation loss {:.4f} (unigram baseline {:.4f})", step, summary.val_loss,
                   summary.unigram_val_loss);
      record("eval", {{"step", double(step)}, {"val_loss", summary.val_loss},
                             {"unigram_val_loss", summary.unigram_val_loss}});
    }
    if (recipe.checkpoint.interval > 0 && step % recipe.checkpoint.interval == 0 && step != t.steps)
      save_weights(weights_path, params, be);
  }
  save_weights(weights_path, params, be);

  const double total = std::chrono::duration<double>(PhaseTimer::Clock::now() - start).count();
  const double busy = summary.phase_seconds[0] + summary.phase_seconds[1] + summary.phase_seconds[2] +
                      summary.phase_seconds[3];
  summary.tokens_per_second = static_cast<double>(tokens_per_step * summary.steps) / busy;
  summary.achieved_flops = flops_per_step * static_cast<double>(summary.steps) / busy;
  summary.peak_resident_bytes = peak_resident_bytes();
  spdlog::info("done: {} steps in {} | {:.0f} tok/s | {:.2f} GFLOP/s achieved = {:.1f}% of {:.2f} GFLOP/s peak",
               summary.steps, format_duration(total), summary.tokens_per_second, summary.achieved_flops / 1e9,
               100.0 * summary.achieved_flops / peak.flops_per_second, peak.flops_per_second / 1e9);
  spdlog::info("time per phase: data {:.1f}% | forward {:.1f}% | backward {:.1f}% | optimizer {:.1f}%",
               100 * summary.phase_seconds[0] / busy, 100 * summary.phase_seconds[1] / busy,
               100 * summary.phase_seconds[2] / busy, 100 * summary.phase_seconds[3] / busy);
  spdlog::info("memory: plan {} | peak resident {} (the rest is code, libraries, the dataset in memory and "
               "BLAS buffers)",
               format_bytes(summary.plan_bytes), format_bytes(summary.peak_resident_bytes));
  spdlog::info("weights: {}{}", weights_path, metrics ? " | metrics: " + metrics_path : std::string());
  return summary;
}

}  // namespace ustrain
