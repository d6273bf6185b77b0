// The host memory `log.trace_steps` takes, planned like any other buffer: the spans of every
// traced step stay in memory until the trace is written, the writer peaks at about 12 times
// the JSON it writes, and the leading rank also holds every rank's document while it merges
// them into trace.json.
#pragma once

#include <cstdint>

#include "core/memory/memory_plan.h"
#include "core/recipe/recipe.h"

namespace ustrain {

inline constexpr const char* kTraceBuffers = "trace spans and writer";

// An upper bound of the spans one rank records in a step of the resolved `recipe`.
std::int64_t trace_spans_per_step(const Recipe& recipe);
// The host bytes of the trace on the leading rank (the most any rank holds); 0 when off.
std::uint64_t trace_host_bytes(const Recipe& recipe);
// Adds them to `plan` as a host buffer when the recipe traces steps.
void plan_trace(const Recipe& recipe, MemoryPlan& plan);

}  // namespace ustrain
