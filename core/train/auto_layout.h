// parallel.layout = "auto": the run asks the planner (core/plan/planner.h, the search `ustrain
// plan` runs) for the fastest layout that fits the processes launched and the device they run
// on. The layout keys the user set by hand constrain the search as `ustrain plan --set` does
// (core/plan/layout_space.h). The leading rank plans and sends its choice to the others: the
// planner measures a CPU, which no two ranks would measure alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/plan/layout_space.h"
#include "core/recipe/recipe.h"
#include "parallel/comm/communicator.h"
#include "parallel/launch.h"
#include "parallel/world.h"

namespace ustrain {

// What the planner is asked.
struct AutoLayoutAsk {
  int processes = 1;
  int processes_per_node = 1;
  std::string device = "cpu";        // "cpu" or a GPU gpu_hardware knows ("h100")
  std::set<std::string> set_by_hand;  // the recipe keys the user set (keys_set_by_hand)
  std::set<std::string> overridden;   // of them, those given with --set (override_keys)
  std::string kept_calibrations;     // CPU: where measured curves are kept; "" measures them every time
};

// The planner's choice and its predictions.
struct AutoLayout {
  Layout layout;
  int processes = 1;
  std::string device;
  std::set<std::string> fixed;  // the layout keys set by hand
  double step_s = 0, tokens_per_s = 0;
  std::size_t memory_bytes = 0;     // per device: the largest rank's
  std::size_t available_bytes = 0;  // per device
  std::int64_t layouts_searched = 0;
  double planning_s = 0;
};

// The fastest layout of `recipe` (its dataset's defaults filled in) that fits; UserError with the
// planner's own message when no layout passes the checks, or naming the smallest when none fits.
AutoLayout choose_layout(const Recipe& recipe, const AutoLayoutAsk& ask);

// `recipe` with the chosen layout's keys ([parallel], train.micro_batch and train.recompute).
Recipe with_auto_layout(const Recipe& recipe, const AutoLayout& chosen);

// One line for the log and --dry-run: the layout and its predicted step time and memory.
std::string auto_layout_line(const AutoLayout& chosen);

// As run.json records it, and back.
nlohmann::json auto_layout_json(const AutoLayout& chosen);
AutoLayout auto_layout_of(const nlohmann::json& j);

// Collective over `world`: what `choose` returns on its rank 0 (the others do not call it), on
// every rank, or its UserError thrown on every rank.
AutoLayout agreed_layout(Communicator& world, const std::function<AutoLayout()>& choose);

// The recipe a launch trains, as given but for the layout.
struct LaidOut {
  Recipe recipe;                   // `given`, with the chosen layout's keys under "auto"
  std::unique_ptr<World> world;    // started to agree on it; null under "manual"
  std::optional<AutoLayout> chosen;
};

// Under "manual", `given`. Under "auto", starts `launch`'s world and agrees on the layout for
// `processes` (the launch's, or what --dry-run plans for without a launcher) on this device.
LaidOut lay_out(const Recipe& given, const ProcessInfo& launch, int processes,
                const std::set<std::string>& set_by_hand, const std::set<std::string>& overridden);

}  // namespace ustrain
