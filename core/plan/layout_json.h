// A layout as JSON, the same fields in `ustrain plan --json` and in run.json's auto_layout,
// and read back from it (the ranks of an auto-layout run take rank 0's choice through it).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/plan/layout_space.h"

namespace ustrain {

// {"dp": 4, "tp": 2, ..., "virtual_stages": 1}; dp_shard as the layout holds it (0: all of dp).
nlohmann::json layout_json(const Layout& l);
// The inverse; nlohmann's exception when a field is missing or of another type.
Layout layout_of(const nlohmann::json& j);

}  // namespace ustrain
