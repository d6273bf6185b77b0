#include "core/tools/bench.h"

#include <fmt/format.h>
#include <malloc.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <array>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/plan/calibration_measure.h"
#include "core/plan/document_length.h"
#include "core/plan/mask_work.h"
#include "core/run/build_info.h"
#include "core/step/model_instance.h"
#include "core/monitor/peak_flops.h"
#include "core/recipe/recipe_defaults.h"
#include "core/train/trainer.h"
#include "data/files/json_input.h"

namespace ustrain {
namespace {

// A FLOP rate with three significant figures in the unit that suits it: a CPU's peak reads
// "123 GFLOP/s", not "0.1 TFLOP/s"; a GPU's "989 TFLOP/s".
std::string flops_rate_text(double flops_per_second) {
  if (flops_per_second >= 0.9995e12) return fmt::format("{:.3g} TFLOP/s", flops_per_second / 1e12);
  return fmt::format("{:.3g} GFLOP/s", flops_per_second / 1e9);
}

// The data, forward, backward and optimizer seconds of step 1, from the run's metrics.
std::optional<std::array<double, 4>> first_step_phases(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = parse_json_or_discarded(line);
    if (record.is_object() && record.value("kind", "") == "train" && record.value("step", 0) == 1)
      return std::array<double, 4>{record.value("data_s", 0.0), record.value("forward_s", 0.0),
                                   record.value("backward_s", 0.0), record.value("optimizer_s", 0.0)};
  }
  return std::nullopt;
}

// Logs the GEMM throughput at the model's shapes and returns the rate of all of them together.
double measure_gemm_rate(const Recipe& recipe) {
  // One tensor-parallel rank's GEMMs (the whole model's at tp = 1), for every layer.
  const ModelGeometry geo = ModelGeometry::of(
      recipe.model, ModelSplit{static_cast<int>(recipe.parallel.tp), 0, recipe.parallel.sp}, recipe.train.seq_len);
  const std::int64_t n = geo.tokens(recipe.train.micro_batch);
  struct Gemm { std::string name; std::int64_t out, in; };
  const std::vector<Gemm> gemms = {{"qkv_proj", geo.qkv_width(), geo.d_model},
                                   {"o_proj", geo.d_model, geo.heads * geo.head_dim},
                                   {"gate_up_proj", 2 * geo.ffn_local, geo.d_model},
                                   {"down_proj", geo.d_model, geo.ffn_local},
                                   {"lm_head", geo.vocab_local, geo.d_model}};
  auto backend = make_recipe_backend(recipe);
  const DType dtype = compute_dtype(recipe);
  spdlog::info("GEMM throughput at the model's shapes ({} tokens per micro-batch), GFLOP/s:", n);
  spdlog::info("  {:<14} {:>22} {:>10} {:>10} {:>10}", "layer", "shape (M, N, K)", "forward", "grad in", "grad w");
  // Each linear runs three GEMMs per step: forward (n, out, in), input grad (n, in, out)
  // and weight grad (out, in, n); the weighted rate is total FLOPs over total time.
  double flops = 0, seconds = 0;
  const std::int64_t layers = geo.n_layers;
  for (const Gemm& g : gemms) {
    const double f0 = measure_gemm_flops(*backend, n, g.out, g.in, 5, dtype);
    const double f1 = measure_gemm_flops(*backend, n, g.in, g.out, 5, dtype);
    const double f2 = measure_gemm_flops(*backend, g.out, g.in, n, 5, dtype);
    spdlog::info("  {:<14} {:>22} {:>10.1f} {:>10.1f} {:>10.1f}", g.name, fmt::format("({}, {}, {})", n, g.out, g.in),
                 f0 / 1e9, f1 / 1e9, f2 / 1e9);
    const double per = 2.0 * static_cast<double>(n * g.out * g.in);
    const double count = g.name == "lm_head" ? 1.0 : static_cast<double>(layers);
    flops += 3 * per * count;
    seconds += count * (per / f0 + per / f1 + per / f2);
  }
  const double gemm_rate = flops / seconds;
  spdlog::info("  weighted {} GEMM rate at the model's shapes: {:.1f} GFLOP/s", dtype_name(dtype), gemm_rate / 1e9);
  return gemm_rate;
}

// What a sliding window or document masking saves: the attention FLOPs the mask needs against
// causal attention's (recorded, core/plan/mask_work.h), and the rate of the work done. MFU
// keeps counting causal attention over the whole sequence.
void report_mask_work(const Recipe& recipe, double achieved, double full_window_ratio) {
  if (recipe.model.sliding_window == 0 && !recipe.train.document_mask) return;
  const PlannedDocuments documents = planned_documents(recipe, 0);
  const double f = mask_work(recipe, documents.tokens).fraction();
  std::string mask = recipe.model.sliding_window > 0
                         ? fmt::format("a sliding window of {} tokens", recipe.model.sliding_window)
                         : "";
  if (!documents.source.empty()) mask += (mask.empty() ? "" : "; ") + documents.source;
  // The model's attention FLOPs (6 L d S per token) are the full-window count's extra half.
  const double attention = achieved * (full_window_ratio - 1.0);
  spdlog::info("bench: the mask needs {:.1f}% of causal attention's FLOPs ({}); counting the work done, training "
               "achieved {:.1f} GFLOP/s (MFU above counts causal attention over the whole sequence, as without a mask)",
               100.0 * f, mask, (achieved - (1.0 - f) * attention) / 1e9);
}

}  // namespace

void run_bench(Recipe recipe, std::int64_t steps, const std::string& calibration_out) {
  // One untimed step more is trained: it must still count in 64 bits.
  if (steps < 1 || steps >= std::numeric_limits<std::int64_t>::max())
    throw UserError(fmt::format("--steps {} is out of range: time between 1 and a few hundred steps", steps));
  recipe = resolve_recipe(recipe, discover_process());  // the GEMM shapes need the vocabulary
  const double gemm_rate = measure_gemm_rate(recipe);  // its backend is gone: the training run makes its own
  if (!calibration_out.empty()) {
    auto backend = make_recipe_backend(recipe);
    const Calibration c = measure_calibration(
        *backend, compute_dtype(recipe),
        fmt::format("measured by ustrain bench on {} ({})", backend->name(), recipe.train.precision),
        model_shapes(recipe.model));
    write_calibration(c, calibration_out);
    spdlog::info("bench: GEMM, attention and bandwidth curves written to {} (for ustrain plan --calibration)",
                 calibration_out);
  }
  // Its operands (the largest the model's GEMMs take) are freed, but glibc keeps freed heap pages
  // resident (freeing large blocks raises its mmap threshold, so later ones come from the heap):
  // give them back, or the training run's peak resident memory holds them outside its plan.
  ::malloc_trim(0);

  // The first step pays one-time costs (allocations, library plans, cold caches), so bench
  // trains one step more than asked and leaves the first out of every rate below, reading its
  // phase times back from the run's metrics.
  recipe.train.steps = steps + 1;
  recipe.schedule.warmup_steps = std::min(recipe.schedule.warmup_steps, recipe.train.steps);
  recipe.train.eval_interval = 0;
  recipe.checkpoint.interval = 0;
  recipe.log.jsonl = true;
  recipe.run.name += "-bench";
  spdlog::info("bench: training {} steps into {} (the first warms up and is not timed); no checkpoint is saved",
               recipe.train.steps, recipe.run_dir());
  TrainOptions options{/*overwrite=*/true};
  options.ustrain_version = build_version();
  options.command = "ustrain bench";
  options.save_final = false;  // a checkpoint of a benchmark is throwaway (and large for big models)
  const TrainSummary s = train(recipe, options);
  const std::int64_t taken = s.steps - s.first_step + 1;
  if (taken <= 0) return;
  std::array<double, 4> phase{s.phase_seconds[0], s.phase_seconds[1], s.phase_seconds[2], s.phase_seconds[3]};
  const double busy_all = phase[0] + phase[1] + phase[2] + phase[3];
  const double flops_per_step = s.achieved_flops * busy_all / static_cast<double>(taken);
  const double tokens_per_step = s.tokens_per_second * busy_all / static_cast<double>(taken);
  std::int64_t timed = taken;
  const auto first = first_step_phases(recipe.run_dir() + "/metrics.jsonl");
  if (first && taken > 1) {
    for (int p = 0; p < 4; ++p) phase[p] -= (*first)[p];
    timed = taken - 1;
  } else {
    spdlog::warn("bench: the warm-up step is included in the rates below (no second step, or no metrics to leave "
                 "it out)");
  }
  const double busy = phase[0] + phase[1] + phase[2] + phase[3];
  const double achieved = flops_per_step * static_cast<double>(timed) / busy;
  const double per_step_ms = 1e3 / static_cast<double>(timed);
  spdlog::info("bench: training achieved {:.1f} GFLOP/s = {:.1f}% of the weighted GEMM rate at the model's shapes",
               achieved / 1e9, 100.0 * achieved / gemm_rate);
  const double full_window_ratio = s.achieved_flops_full_window / s.achieved_flops;
  spdlog::info("bench: {:.0f} tokens/s | MFU {:.1f}% of {} ({:.1f}% counting attention as 12 L d S, as torchtitan, "
               "nanotron and OLMo-core do) over {} timed steps",
               tokens_per_step * static_cast<double>(timed) / busy, 100.0 * achieved / s.peak_flops,
               flops_rate_text(s.peak_flops), 100.0 * achieved * full_window_ratio / s.peak_flops, timed);
  report_mask_work(recipe, achieved, full_window_ratio);
  spdlog::info("bench: per step {:.1f} ms = data {:.1f} + forward {:.1f} + backward {:.1f} + optimizer {:.1f} ms",
               busy * per_step_ms, phase[0] * per_step_ms, phase[1] * per_step_ms, phase[2] * per_step_ms,
               phase[3] * per_step_ms);
  spdlog::info("bench: peak resident {:.1f} MiB vs plan {:.1f} MiB", static_cast<double>(s.peak_resident_bytes) / 1048576.0,
               static_cast<double>(s.plan_bytes) / 1048576.0);
  if (s.peak_device_bytes > 0)
    spdlog::info("bench: peak device memory {:.1f} MiB vs plan {:.1f} MiB ({:+.1f}%)",
                 static_cast<double>(s.peak_device_bytes) / 1048576.0, static_cast<double>(s.plan_bytes) / 1048576.0,
                 100.0 * (static_cast<double>(s.peak_device_bytes) / static_cast<double>(s.plan_bytes) - 1.0));
}

}  // namespace ustrain
