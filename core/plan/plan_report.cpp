#include "core/plan/plan_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/plan/layout_json.h"
#include "core/run/launch_lines.h"

namespace ustrain {
namespace {

std::string gib(std::size_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / (1u << 30)); }

std::string schedule(const Layout& l) {
  if (l.pp == 1) return "-";
  return l.virtual_stages > 1 ? fmt::format("{} v{}", l.pp_schedule, l.virtual_stages) : l.pp_schedule;
}

// How attention is priced under a mask other than plain causal; nothing without one.
std::string mask_line(const Plan& plan) {
  std::vector<std::string> parts;
  if (plan.sliding_window > 0) parts.push_back(fmt::format("a sliding window of {} tokens", plan.sliding_window));
  if (!plan.documents.source.empty()) parts.push_back(plan.documents.source);
  if (parts.empty()) return "";
  return fmt::format("attention priced by the work its mask needs: {}; MFU counts causal attention over the whole "
                     "sequence (6 L d S per token), as without a mask\n",
                     fmt::join(parts, "; "));
}

}  // namespace

std::string no_layout_fits(const Plan& plan) {
  // Nothing is outranked while nothing fits; an outranked layout's memory is unknown.
  const PlannedLayout& least = *std::min_element(plan.layouts.begin(), plan.layouts.end(), [](auto& a, auto& b) {
    if (a.outranked != b.outranked) return b.outranked;
    return a.memory.bytes < b.memory.bytes;
  });
  return fmt::format("no layout fits: the smallest ({}, zero {}, recompute {}, micro-batch {}) needs {}{} GiB of {} GiB "
                     "per device; use more devices or a smaller model",
                     least.layout.str(), least.layout.zero, least.layout.recompute, least.layout.micro_batch,
                     least.pruned ? "at least " : "", gib(least.memory.bytes), gib(least.memory.available));
}

std::string plan_text(const Plan& plan, const PlanCommand& command, int top) {
  const Hardware& hw = plan.hardware;
  std::string s;
  if (hw.cpu)
    s += fmt::format("device: this machine's CPU ({}), {} thread(s) per rank; curves {}\n", hw.source,
                     plan.threads_per_rank, plan.calibration.source);
  else
    s += fmt::format("device: {} ({}), {:.0f} GB; curves: {}\nGPU times below are predictions, not measurements\n",
                     hw.name, hw.source, static_cast<double>(hw.memory_bytes) / 1e9, plan.calibration.source);
  s += mask_line(plan);
  std::size_t fitting = 0, pruned = 0, outranked = 0;
  for (const PlannedLayout& p : plan.layouts) {
    fitting += p.memory.fits ? 1 : 0;
    pruned += p.pruned ? 1 : 0;
    outranked += p.outranked ? 1 : 0;
  }
  if (plan.fastest > 0)
    s += fmt::format("{} layouts pass the recipe checks ({} left out by a memory bound, {} by a step-time bound as "
                     "slower than the {} fastest; {} distinct rank steps recorded, {} more for the bounds); {} of those "
                     "planned fit; global batch {} sequences\n\n",
                     plan.candidates, pruned, outranked, plan.fastest, plan.recorded_steps, plan.bounding_steps,
                     fitting, plan.global_batch);
  else
    s += fmt::format("{} layouts pass the recipe checks ({} left out by a memory bound, {} distinct rank steps "
                     "recorded); {} fit; global batch {} sequences\n\n",
                     plan.candidates, pruned, plan.recorded_steps, fitting, plan.global_batch);
  if (fitting == 0) return s + no_layout_fits(plan) + "\n";
  // The dp_shard column shows only where a listed layout shards over less than all of dp.
  bool any_hybrid = false;
  for (std::size_t i = 0; i < fitting && static_cast<int>(i) < top; ++i) any_hybrid |= plan.layouts[i].layout.hybrid();
  const auto shard_cell = [&](const std::string& cell) { return any_hybrid ? fmt::format(" {:>5}", cell) : ""; };
  s += fmt::format("{:>3} {:>4} {:>3} {:>3} {:>3} {:>3} {:>4}{} {:>3} {:<9} {:>3} {:>5} {:<14} {:>8} {:>9} {:>11} {:>5}  {}\n",
                   "#", "dp", "tp", "pp", "cp", "ep", "zero", shard_cell("shard"), "sp", "recompute", "mb", "accum",
                   "schedule", "mem GiB", "step s", "tokens/s", "MFU", "limited by");
  int shown = 0;
  for (const PlannedLayout& p : plan.layouts) {
    if (!p.memory.fits || shown == top) break;
    const Layout& l = p.layout;
    s += fmt::format("{:>3} {:>4} {:>3} {:>3} {:>3} {:>3} {:>4}{} {:>3} {:<9} {:>3} {:>5} {:<14} {:>8} {:>9.4g} {:>11.0f} "
                     "{:>4.1f}%  {}\n",
                     ++shown, l.dp, l.tp, l.pp, l.cp, l.ep, l.zero, shard_cell(l.hybrid() ? std::to_string(l.dp_shard) : "-"),
                     l.tp > 1 ? (l.sp ? "on" : "off") : "-", l.recompute, l.micro_batch, l.grad_accum, schedule(l),
                     gib(p.memory.bytes), p.time.step_s, p.tokens_per_s, 100 * p.mfu, p.limits);
  }
  const PlannedLayout& best = plan.layouts.front();
  std::vector<std::string> sets = best.layout.overrides();
  if (hw.cpu) sets.push_back(fmt::format("device.threads={}", plan.threads_per_rank));
  s += "\nthe best layout, as options to paste:\n ";
  for (const std::string& o : sets) s += " --set " + shell_word(o);
  std::vector<std::string> all = command.overrides;
  if (!hw.cpu) all.push_back("device.type=cuda");
  all.insert(all.end(), sets.begin(), sets.end());
  const std::int64_t ranks = best.layout.dp * best.layout.tp * best.layout.pp * best.layout.cp;
  s += "\n\nstarted with one of:\n";
  s += ranks > 1 ? launch_lines(TrainCommand{command.recipe_path, all}, ranks) : "";
  if (ranks == 1) {
    std::string line = "  ustrain train " + shell_word(command.recipe_path);
    for (const std::string& o : all) line += " --set " + shell_word(o);
    s += line + "\n";
  }
  return s;
}

std::string plan_json(const Plan& plan) {
  nlohmann::json layouts = nlohmann::json::array();
  for (const PlannedLayout& p : plan.layouts) {
    const Layout& l = p.layout;
    nlohmann::json j = layout_json(l);
    j["dp_shard"] = l.shard_dp();  // resolved: the ranks each ZeRO shard spans
    j["memory_bytes"] = p.memory.bytes;
    j["rank_memory_bytes"] = p.memory.rank_bytes;
    j["fits"] = p.memory.fits;
    j["limits"] = p.limits;
    // A layout that does not fit is not timed: its times are null.
    const auto timed = [&](double v) { return p.memory.fits ? nlohmann::json(v) : nlohmann::json(nullptr); };
    if (p.pruned) j["pruned"] = true;  // memory_bytes is a bound: the layout was never recorded
    j["step_s"] = timed(p.time.step_s);
    j["compute_s"] = timed(p.time.compute_s);
    j["tp_s"] = timed(p.time.tp_s);
    j["cp_s"] = timed(p.time.cp_s);
    j["ep_s"] = timed(p.time.ep_s);
    j["dp_s"] = timed(p.time.dp_s);
    j["bubble_s"] = timed(p.time.bubble_s);
    j["shared_cores_s"] = timed(p.time.shared_cores_s);
    j["tokens_per_s"] = timed(p.tokens_per_s);
    j["mfu"] = timed(p.mfu);
    layouts.push_back(std::move(j));
  }
  nlohmann::json j{{"device", plan.hardware.name}, {"predicted", !plan.hardware.cpu}, {"layouts", layouts}};
  if (plan.sliding_window > 0) j["sliding_window"] = plan.sliding_window;
  if (!plan.documents.source.empty()) j["document_tokens"] = plan.documents.tokens;  // 0: one per sequence
  return j.dump(1) + "\n";
}

}  // namespace ustrain
