#include "core/plan/planner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/model/llama.h"
#include "core/monitor/kept_peak.h"
#include "core/plan/calibration_measure.h"
#include "core/plan/kept_calibration.h"
#include "core/plan/parallel_for.h"
#include "core/step/model_instance.h"
#include "core/step/training_step.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// The largest shares of the step and of memory, in that order of size: what to change first.
std::string limits_of(const PlannedLayout& p) {
  const StepTime& t = p.time;
  std::vector<std::pair<double, std::string>> found;
  const auto share = [&](double s) { return t.step_s > 0 ? s / t.step_s : 0; };
  if (share(t.shared_cores_s) >= 0.05)
    found.emplace_back(share(t.shared_cores_s), fmt::format("ranks share cores {:.0f}%", 100 * share(t.shared_cores_s)));
  if (share(t.bubble_s) >= 0.05) found.emplace_back(share(t.bubble_s), fmt::format("bubble {:.0f}%", 100 * share(t.bubble_s)));
  if (share(t.tp_s) >= 0.05)
    found.emplace_back(share(t.tp_s), t.tp_across_nodes ? "tp all-reduce over inter-node links"
                                                        : fmt::format("tp collectives {:.0f}%", 100 * share(t.tp_s)));
  if (share(t.cp_s) >= 0.05)
    found.emplace_back(share(t.cp_s), fmt::format("cp ring {:.0f}%{}", 100 * share(t.cp_s),
                                                  t.cp_across_nodes ? " over inter-node links" : ""));
  if (share(t.ep_s) >= 0.05)
    found.emplace_back(share(t.ep_s), fmt::format("ep all-to-all {:.0f}%{}", 100 * share(t.ep_s),
                                                  t.ep_across_nodes ? " over inter-node links" : ""));
  if (share(t.dp_s) >= 0.05)
    found.emplace_back(share(t.dp_s), fmt::format("gradient sync {:.0f}%{}", 100 * share(t.dp_s),
                                                  t.dp_across_nodes ? " over inter-node links" : ""));
  if (p.memory.fraction() >= 0.9 || !p.memory.fits)
    found.emplace_back(p.memory.fraction(), fmt::format("memory {:.0f}%", 100 * p.memory.fraction()));
  if (p.layout.recompute != "none") found.emplace_back(0.01, fmt::format("recompute {}", p.layout.recompute));
  std::stable_sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first > b.first; });
  if (found.empty()) return fmt::format("compute (MFU {:.0f}%)", 100 * p.mfu);
  std::string s;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, found.size()); ++i) s += (i ? ", " : "") + found[i].second;
  return s;
}

// The tokens per step to plan for, at most kMaxPlanTokens.
std::int64_t global_batch_tokens(const Recipe& r, const PlanOptions& o) {
  const std::string most = fmt::format("the planner takes at most 2^40 = {} tokens per step, thousands of times the "
                                       "largest batches trained so far",
                                       kMaxPlanTokens);
  if (o.global_batch_tokens > kMaxPlanTokens)
    throw UserError(fmt::format("--global-batch-tokens {}: {}; give a smaller batch", o.global_batch_tokens, most));
  if (o.global_batch_tokens > 0) return o.global_batch_tokens;
  const std::int64_t seq = r.train.seq_len;
  if (r.train.global_batch > kMaxPlanTokens / seq)  // divided: the product may not fit in 64 bits
    throw UserError(fmt::format("{}: train.global_batch = {} sequences of train.seq_len = {} tokens: {}; give a "
                                "smaller batch (--global-batch-tokens N)",
                                r.source, r.train.global_batch, seq, most));
  return r.train.global_batch * seq;
}

// Layouts planned between two updates of the step time a bound must beat
// (PlanOptions::fastest): the fewer, the sooner the limit falls; the more, the more the
// threads share.
constexpr std::size_t kBoundedBatch = 32;

// A layout whose step takes at least `bound` s, more than the fastest already found.
PlannedLayout outranked(const Candidate& c, double bound) {
  PlannedLayout p;
  p.layout = c.layout;
  p.outranked = true;
  p.time.step_s = bound;
  p.limits = fmt::format("step at least {:.4g} s", bound);
  return p;
}

// A predicted step time that is not a positive number would rank as the best layout: the
// inputs' bounds (check_plausible) keep it from happening.
void check_step_time(const PlannedLayout& p) {
  if (std::isfinite(p.time.step_s) && p.time.step_s > 0 && std::isfinite(p.tokens_per_s)) return;
  throw UserError(fmt::format("the predicted step time of layout {} is {} s: the hardware figures or the calibration "
                              "are out of range; check --peak-tflops, --intra-node-gbps, --inter-node-gbps and the "
                              "--calibration file",
                              p.layout.str(), p.time.step_s));
}

// Why no layout passed: the bounds, the keys set by hand, or the recipe checks' own words for
// the plainest layout.
[[noreturn]] void explain_no_layout(const Recipe& base, const SearchSpace& space, const LayoutSearch& search) {
  const std::int64_t seq = base.train.seq_len;
  if (search.beyond_bounds)
    throw UserError(fmt::format("a global batch of {} sequences of {} tokens on {} devices leaves no layout with "
                                "micro-batches of at most 2^24 = {} tokens and at most {} of them per step; give a "
                                "smaller --global-batch-tokens or more --gpus",
                                space.global_batch, seq, space.devices, kMaxMicroBatchTokens, kMaxMicroBatchesPerStep));
  if (!space.fixed.empty()) {
    SearchSpace free = space;
    free.fixed.clear();
    const std::size_t unfixed = enumerate_layouts(base, free).candidates.size();
    if (unfixed > 0) {
      std::vector<std::string> set;
      for (const std::string& key : space.fixed) set.push_back(fmt::format("{} = {}", key, given_value(key, space)));
      throw UserError(fmt::format("no layout of {} devices has {}, set by hand in the recipe or with --set ({} layouts "
                                  "pass the recipe checks without them); change those keys, or remove them to let the "
                                  "planner search them",
                                  space.devices, fmt::join(set, " and "), unfixed));
    }
  }
  Recipe plain = base;
  plain.parallel.dp = space.devices;
  plain.train.global_batch = space.global_batch;
  try {
    check_recipe(plain);
  } catch (const UserError& e) {
    throw UserError(fmt::format("no layout of {} devices passes the recipe checks; data parallelism alone is "
                                "refused with: {}", space.devices, e.what()));
  }
  throw UserError(fmt::format("no layout of {} devices passes the recipe checks for a global batch of {} "
                              "sequences; try another --global-batch-tokens", space.devices, space.global_batch));
}

// The plan's curves: the --calibration file, this CPU measured now, or the GPU's documented
// defaults; on the CPU, MFU is counted against its best GEMM rate.
void set_calibration(Plan& plan, const Recipe& base, const PlanOptions& o, bool cpu, int at_once) {
  const DType compute = compute_dtype(base);
  if (!o.calibration.empty()) {
    plan.calibration = read_calibration(o.calibration);
  } else if (cpu) {
    const ModelShapes shapes = model_shapes(base.model);
    const auto measure = [&] {
      return measure_shared_cpu_calibration(
          at_once, plan.threads_per_rank, compute,
          fmt::format("measured by {} rank(s) of {} thread(s) at once", at_once, plan.threads_per_rank), shapes);
    };
    const std::string key = peak_key(fmt::format("{} rank(s) of {} thread(s) at once, {}, head_dim {}, linears {}",
                                                 at_once, plan.threads_per_rank, dtype_name(compute), shapes.head_dim,
                                                 fmt::join(shapes.linears, " ")));
    plan.calibration = o.kept_calibrations.empty() ? measure() : kept_calibration(o.kept_calibrations, key, measure);
  } else {
    plan.calibration = default_gpu_calibration(plan.hardware, compute);
  }
  if (cpu && !o.hardware.peak_tflops) {
    double best = 0;
    for (const auto& [flops, rate] : plan.calibration.gemm.points) best = std::max(best, rate);
    plan.hardware.peak_fp32_flops = plan.hardware.peak_bf16_flops = best;  // MFU against the best GEMM rate
  }
}

}  // namespace

Recipe recipe_for_device(Recipe r, const PlanOptions& o, int threads_per_rank) {
  r.device.type = o.gpu == "cpu" ? "cpu" : "cuda";
  if (o.gpu == "cpu") r.device.threads = threads_per_rank;
  r.parallel.dp = 0;
  return r;
}

Plan plan_layouts(const Recipe& given, const PlanOptions& o) {
  if (o.devices < 1) throw UserError(fmt::format("--gpus {}: give the number of devices to plan for (1 or more)", o.devices));
  if (o.devices_per_node < 1)
    throw UserError(fmt::format("--gpus-per-node {}: give the devices of one node (1 or more)", o.devices_per_node));
  if (given.model.vocab_size == 0)
    throw UserError(fmt::format("{}: model.vocab_size is left to the dataset; the planner reads no data, so set it "
                                "(--set model.vocab_size=N)", given.source));
  Plan plan;
  const std::int64_t seq = given.train.seq_len;
  const std::int64_t tokens = global_batch_tokens(given, o);
  if (tokens % seq != 0)
    throw UserError(fmt::format("--global-batch-tokens {} is not a multiple of train.seq_len = {}; give whole "
                                "sequences, e.g. {}", tokens, seq, (tokens / seq + 1) * seq));
  plan.global_batch = tokens / seq;
  const int per_node = std::min(o.devices, o.devices_per_node);
  Device device = Device::cuda;
  int at_once = per_node;
  if (o.gpu == "cpu") {
    device = Device::cpu;
    plan.hardware = with_overrides(measure_cpu_hardware(), o.hardware);
    plan.threads_per_rank = given.device.threads > 0 ? static_cast<int>(given.device.threads)
                                                     : std::max(1, plan.hardware.cores / per_node);
    at_once = std::clamp(plan.hardware.cores / plan.threads_per_rank, 1, per_node);
  } else {
    plan.hardware = with_overrides(gpu_hardware(o.gpu), o.hardware);
  }
  const Recipe base = recipe_for_device(given, o, plan.threads_per_rank);
  const DType compute = compute_dtype(base);
  set_calibration(plan, base, o, device == Device::cpu, at_once);
  SearchSpace space{o.devices, o.devices_per_node, plan.global_batch, o.model_parallel_across_nodes};
  space.fixed = o.fixed_keys;
  space.given = given.parallel;
  space.given_train = given.train;
  const LayoutSearch search = enumerate_layouts(base, space);
  plan.candidates = static_cast<std::int64_t>(search.candidates.size());
  if (search.candidates.empty()) explain_no_layout(base, space, search);
  const ModelGeometry whole = geometry_of(base, 0, 0);
  const double flops_per_token = LlamaModel(base.model, whole, 1, Recompute::none).flops_per_token(seq);
  plan.sliding_window = base.model.sliding_window;
  plan.documents = planned_documents(base, o.document_tokens);
  StepTimeModel model(plan.hardware, plan.calibration, per_node, device, at_once, plan.documents.tokens);
  LayoutMemoryPlanner memory(plan.hardware, per_node);
  const auto plan_one = [&](const Candidate& c) {
    PlannedLayout p;
    p.layout = c.layout;
    const Recipe recipe = c.recipe();
    // Most layouts of many devices do not fit: the bound discards them before any recording.
    p.memory = memory.bound(recipe);
    p.pruned = !p.memory.fits;
    if (!p.pruned) p.memory = memory.of(recipe, [&](int pp_rank) { return model.op_scratch(recipe, pp_rank); });
    // Only what fits is timed.
    if (p.memory.fits) {
      p.time = model.predict(recipe, memory.programs(recipe).programs.train);
      p.tokens_per_s = static_cast<double>(tokens) / p.time.step_s;
      p.mfu = flops_per_token * p.tokens_per_s / (o.devices * plan.hardware.peak_flops(compute));
      check_step_time(p);
    }
    p.limits = p.memory.fits ? limits_of(p) : fmt::format("memory {:.0f}%", 100 * p.memory.fraction());
    return p;
  };
  const std::vector<Candidate>& candidates = search.candidates;
  const auto progress = [&](const char* stage) {
    return [&o, stage, n = candidates.size()](std::size_t done) {
      if (o.progress) o.progress(stage, done, n);
    };
  };
  // Without bounds every layout is planned, in one pass. With them, the layouts go in the order
  // of the looser bound (StepTimeModel::busy_lower_bound), a batch at a time; a layout whose
  // bound, or then whose tighter bound (step_lower_bound), exceeds the Nth fastest step found
  // in the batches before is left out. The batches have a fixed size, so the same layouts are
  // planned whatever the number of threads.
  std::vector<double> bounds;
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (o.fastest > 0) {
    bounds.resize(candidates.size());
    // Neighbouring candidates share their probes: visited in a shuffled order, the threads record
    // different probes at once rather than wait for one another's.
    std::vector<std::size_t> visit = order;
    std::shuffle(visit.begin(), visit.end(), std::mt19937_64(candidates.size()));
    parallel_for(
        visit.size(), o.threads,
        [&](std::size_t j) { bounds[visit[j]] = model.busy_lower_bound(candidates[visit[j]].recipe()); },
        progress("bounded"));
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bounds[a] < bounds[b]; });
  }
  plan.layouts.resize(candidates.size());
  const std::size_t batch = o.fastest > 0 ? kBoundedBatch : std::max<std::size_t>(1, candidates.size());
  std::vector<double> fastest;  // the step times of the N fastest fitting layouts so far, ascending
  // A bound within rounding of the Nth fastest is planned: a tie keeps the candidates' order.
  double limit = std::numeric_limits<double>::infinity();
  const auto beyond = [&](double bound) { return bound > limit * (1 + 1e-9); };
  const auto planned = progress("planned");
  for (std::size_t begin = 0; begin < order.size(); begin += batch) {
    if (!bounds.empty() && beyond(bounds[order[begin]])) {  // and so are all the layouts after it
      for (std::size_t j = begin; j < order.size(); ++j)
        plan.layouts[order[j]] = outranked(candidates[order[j]], bounds[order[j]]);
      planned(order.size());
      break;
    }
    const std::size_t end = std::min(order.size(), begin + batch);
    parallel_for(
        end - begin, o.threads,
        [&](std::size_t j) {
          const std::size_t i = order[begin + j];
          if (bounds.empty()) {
            plan.layouts[i] = plan_one(candidates[i]);
            return;
          }
          if (beyond(bounds[i])) {
            plan.layouts[i] = outranked(candidates[i], bounds[i]);
            return;
          }
          const Recipe recipe = candidates[i].recipe();
          const double tighter = model.step_lower_bound(recipe, memory.programs(recipe).programs.train);
          plan.layouts[i] = beyond(tighter) ? outranked(candidates[i], tighter) : plan_one(candidates[i]);
        },
        [&](std::size_t done) { planned(begin + done); });
    if (bounds.empty()) continue;
    for (std::size_t j = begin; j < end; ++j) {
      const PlannedLayout& p = plan.layouts[order[j]];
      if (!p.memory.fits) continue;
      fastest.insert(std::upper_bound(fastest.begin(), fastest.end(), p.time.step_s), p.time.step_s);
      if (fastest.size() > o.fastest) fastest.pop_back();
    }
    if (fastest.size() == o.fastest) limit = fastest.back();
  }
  plan.recorded_steps = model.recorded_steps();
  plan.bounding_steps = model.bounding_steps();
  plan.fastest = o.fastest;
  std::stable_sort(plan.layouts.begin(), plan.layouts.end(), [](const PlannedLayout& a, const PlannedLayout& b) {
    if (a.outranked != b.outranked) return b.outranked;
    if (a.memory.fits != b.memory.fits) return a.memory.fits;
    if (a.pruned != b.pruned) return b.pruned;
    return a.memory.fits ? a.tokens_per_s > b.tokens_per_s : a.memory.bytes < b.memory.bytes;
  });
  return plan;
}

}  // namespace ustrain
