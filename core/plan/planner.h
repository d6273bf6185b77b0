// `ustrain plan`: the fastest layout of a recipe that fits N devices. Enumerates the layouts
// the recipe checks accept (layout_space.h), prunes those whose memory bound does not fit,
// plans the others' memory with the trainer's own plan (layout_memory.h) and predicts the
// step time of those that fit (step_time.h), then ranks them: those that fit first, by tokens
// per second, then the others by memory, the pruned last. Asked for the fastest few, it plans
// the layouts in the order of a lower bound of their step time and stops where that bound
// passes the slowest of the few found.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/plan/calibration.h"
#include "core/plan/document_length.h"
#include "core/plan/hardware.h"
#include "core/plan/layout_memory.h"
#include "core/plan/layout_space.h"
#include "core/plan/step_time.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// The largest global batch a plan searches, in tokens: 2^40. Its divisors (the micro-batches
// and data-parallel sizes) stay few and quick to find.
constexpr std::int64_t kMaxPlanTokens = std::int64_t{1} << 40;

struct PlanOptions {
  int devices = 0;
  int devices_per_node = 8;
  std::string gpu = "h100";            // h100 | h200 | a100 | cpu
  std::int64_t global_batch_tokens = 0;  // 0: the recipe's
  std::int64_t document_tokens = 0;      // train.document_mask's mean document length; 0: the dataset's
  HardwareOverrides hardware;
  std::string calibration;             // a file from `ustrain bench --calibration-out`; "" none
  // CPU: a directory keeping the measured curves (kept_calibration.h); "" measures them every time.
  std::string kept_calibrations;
  bool model_parallel_across_nodes = false;  // let tp and ep span nodes (they stay within one by default)
  // The layout keys set by hand (SearchSpace::fixed, layout_keys_among): the recipe's values for them are kept.
  std::set<std::string> fixed_keys;
  int threads = 0;  // layouts planned at once; 0: one per core
  // 0: plan every layout. N: plan only those that may be among the N fastest that fit; the
  // others are left out by a lower bound of their step time (StepTimeModel::step_lower_bound)
  // before their memory is planned or their step recorded.
  std::size_t fastest = 0;
  // Called after each layout is bounded (`stage` "bounded") or planned ("planned"), never by
  // two threads at once.
  std::function<void(const char* stage, std::size_t done, std::size_t layouts)> progress;
};

struct PlannedLayout {
  Layout layout;
  LayoutMemory memory;
  StepTime time;
  double tokens_per_s = 0, mfu = 0;
  // Left out before its step was recorded: its memory is LayoutMemoryPlanner::bound, which
  // already exceeds the device.
  bool pruned = false;
  // Left out before anything else (PlanOptions::fastest): its step takes at least
  // `time.step_s`, longer than the Nth fastest's; its memory is unknown.
  bool outranked = false;
  std::string limits;  // what holds it back most, "bubble 18%, memory 97%"
};

struct Plan {
  Hardware hardware;
  Calibration calibration;
  int threads_per_rank = 0;  // CPU: device.threads of the proposed layouts
  std::int64_t global_batch = 0;  // sequences
  std::int64_t candidates = 0;    // layouts the recipe checks accepted
  std::size_t recorded_steps = 0;  // distinct rank steps recorded
  std::size_t fastest = 0;         // PlanOptions::fastest
  std::size_t bounding_steps = 0;  // and recorded for the step-time bounds (PlanOptions::fastest)
  std::int64_t sliding_window = 0;  // model.sliding_window, priced by the attention it needs
  PlannedDocuments documents;       // what document masking is priced with
  std::vector<PlannedLayout> layouts;  // fitting first, fastest first; then the others, the outranked last
};

// `recipe` as loaded (RecipeUse::run); UserError for options it cannot plan.
Plan plan_layouts(const Recipe& recipe, const PlanOptions& options);

// The recipe with the options' device applied (device.type, and on the CPU device.threads):
// what the layouts are checked and planned with.
Recipe recipe_for_device(Recipe recipe, const PlanOptions& options, int threads_per_rank);

}  // namespace ustrain
