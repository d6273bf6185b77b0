// What `ustrain plan` prints: the top layouts that fit as a table with what limits each, then
// the best as `--set` options and its launch lines; or all of them as JSON.
#pragma once

#include <string>
#include <vector>

#include "core/plan/planner.h"

namespace ustrain {

struct PlanCommand {
  std::string recipe_path;
  std::vector<std::string> overrides;  // the user's --set, before the layout's
};

// Why none of the plan's layouts fits: the smallest, its memory and the device's.
std::string no_layout_fits(const Plan& plan);
std::string plan_text(const Plan& plan, const PlanCommand& command, int top);
// {"layouts": [{"dp": .., ..., "limits": ".."}, ...]}, best first, those that do not fit last.
std::string plan_json(const Plan& plan);

}  // namespace ustrain
