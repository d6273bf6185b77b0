// The steps `log.trace_steps` names: "10-12" (steps 10 to 12) or "10" (step 10 alone).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ustrain {

struct StepRange {
  std::int64_t first = 0, last = 0;  // inclusive, 1 <= first <= last
  bool contains(std::int64_t step) const { return first <= step && step <= last; }
  bool operator==(const StepRange&) const = default;
};

// nullopt for "" (tracing off). Throws UserError for anything else that is not "A-B" or "A"
// with 1 <= A <= B, saying what a valid value looks like.
std::optional<StepRange> parse_step_range(std::string_view text);

// "steps 10-12", "step 10".
std::string describe(const StepRange& range);

}  // namespace ustrain
