#include "core/train/auto_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <functional>

#include "core/distributed/fail_together.h"
#include "core/distributed/process_layout.h"
#include "core/plan/hardware.h"
#include "core/plan/kept_calibration.h"
#include "core/plan/layout_json.h"
#include "core/plan/plan_report.h"
#include "core/plan/planner.h"
#include "core/recipe/recipe_defaults.h"
#include "kernels/backend.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// What the planner prices: this machine's CPU, or the GPU this rank would train on.
std::string planned_device(const Recipe& recipe, int local_rank) {
  return recipe.device.type == "cpu" ? "cpu" : described_gpu(gpu_description(local_rank));
}

}  // namespace

AutoLayout choose_layout(const Recipe& recipe, const AutoLayoutAsk& ask) {
  const auto started = std::chrono::steady_clock::now();
  PlanOptions options;
  options.devices = ask.processes;
  options.devices_per_node = ask.processes_per_node;
  options.gpu = ask.device;
  options.kept_calibrations = ask.kept_calibrations;
  options.fixed_keys = layout_keys_among(ask.set_by_hand, ask.overridden);
  options.fastest = 1;
  const Plan plan = plan_layouts(recipe, options);
  const PlannedLayout& best = plan.layouts.front();  // plan_layouts throws when there is none
  if (!best.memory.fits)
    throw UserError(fmt::format("{}: parallel.layout = \"auto\" for {} process(es) on {}: {}; or set the layout by "
                                "hand (parallel.layout = \"manual\")",
                                recipe.source, ask.processes, ask.device, no_layout_fits(plan)));
  AutoLayout chosen;
  chosen.layout = best.layout;
  chosen.processes = ask.processes;
  chosen.device = ask.device;
  chosen.fixed = options.fixed_keys;
  chosen.step_s = best.time.step_s;
  chosen.tokens_per_s = best.tokens_per_s;
  chosen.memory_bytes = best.memory.bytes;
  chosen.available_bytes = best.memory.available;
  chosen.layouts_searched = plan.candidates;
  chosen.planning_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return chosen;
}

Recipe with_auto_layout(const Recipe& recipe, const AutoLayout& chosen) {
  return recipe_with_layout(recipe, chosen.layout, recipe.train.global_batch);
}

std::string auto_layout_line(const AutoLayout& a) {
  const Layout& l = a.layout;
  std::string schedule = l.pp > 1 ? fmt::format(", {} schedule", l.pp_schedule) : "";
  if (l.pp > 1 && l.virtual_stages > 1) schedule += fmt::format(" x{} virtual stages", l.virtual_stages);
  const std::string fixed = a.fixed.empty() ? "" : fmt::format(" (set by hand: {})", fmt::join(a.fixed, ", "));
  return fmt::format("auto layout for {} process(es) on {}: {}, zero {}, {} micro-batch(es) of {}, recompute {}{}{}; "
                     "predicted {:.4g} s per step ({:.0f} tokens/s), {} of {} per device; the fastest of {} layouts, "
                     "planned in {:.2f} s",
                     a.processes, a.device, l.str(), l.zero, l.grad_accum, l.micro_batch, l.recompute, schedule, fixed,
                     a.step_s, a.tokens_per_s, format_bytes(a.memory_bytes), format_bytes(a.available_bytes),
                     a.layouts_searched,
                     a.planning_s);
}

nlohmann::json auto_layout_json(const AutoLayout& a) {
  return {{"processes", a.processes},
          {"device", a.device},
          {"set_by_hand", a.fixed},
          {"layout", layout_json(a.layout)},
          {"predicted_step_s", a.step_s},
          {"predicted_tokens_per_s", a.tokens_per_s},
          {"predicted_memory_bytes", a.memory_bytes},
          {"available_memory_bytes", a.available_bytes},
          {"layouts_searched", a.layouts_searched},
          {"planning_s", a.planning_s}};
}

AutoLayout auto_layout_of(const nlohmann::json& j) {
  AutoLayout a;
  j.at("processes").get_to(a.processes), j.at("device").get_to(a.device), j.at("set_by_hand").get_to(a.fixed);
  a.layout = layout_of(j.at("layout"));
  j.at("predicted_step_s").get_to(a.step_s), j.at("predicted_tokens_per_s").get_to(a.tokens_per_s);
  j.at("predicted_memory_bytes").get_to(a.memory_bytes), j.at("available_memory_bytes").get_to(a.available_bytes);
  j.at("layouts_searched").get_to(a.layouts_searched), j.at("planning_s").get_to(a.planning_s);
  return a;
}

AutoLayout agreed_layout(Communicator& world, const std::function<AutoLayout()>& choose) {
  nlohmann::json decision;
  if (world.rank() == 0) {
    try {
      decision = {{"chosen", auto_layout_json(choose())}};
    } catch (const UserError& e) {
      decision = {{"error", e.what()}};
    }
  }
  decision = nlohmann::json::parse(broadcast_text(world, decision.dump(), 0));
  if (decision.contains("error")) throw UserError(decision["error"].get<std::string>());
  return auto_layout_of(decision.at("chosen"));
}

LaidOut lay_out(const Recipe& given, const ProcessInfo& launch, int processes,
                const std::set<std::string>& set_by_hand, const std::set<std::string>& overridden) {
  LaidOut out{given, nullptr, std::nullopt};
  if (given.parallel.layout != "auto") return out;
  out.world = start_world(given, launch);
  const Recipe planned = with_dataset_defaults(given);  // the planner needs model.vocab_size
  AutoLayoutAsk ask;
  ask.processes = processes;
  ask.processes_per_node = launch.launcher == "none" ? processes : launch.local_world_size;
  ask.set_by_hand = set_by_hand;
  ask.overridden = overridden;
  ask.kept_calibrations = kept_calibration_dir();
  const std::unique_ptr<Communicator> everyone = out.world->everyone();
  out.chosen = agreed_layout(*everyone, [&] {
    ask.device = planned_device(given, launch.local_rank);
    return choose_layout(planned, ask);
  });
  out.recipe = with_auto_layout(given, *out.chosen);
  return out;
}

}  // namespace ustrain
