#include "core/recipe/step_range.h"

#include <fmt/format.h>

#include <charconv>

#include "kernels/error.h"

namespace ustrain {
namespace {

// A step number: decimal digits only (no sign, no spaces), at least 1.
std::optional<std::int64_t> step_number(std::string_view text) {
  std::int64_t value = 0;
  if (text.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  return value;
}

}  // namespace

std::optional<StepRange> parse_step_range(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const auto dash = text.find('-');
  const std::optional<std::int64_t> first = step_number(text.substr(0, dash));
  const std::optional<std::int64_t> last =
      dash == std::string_view::npos ? first : step_number(text.substr(dash + 1));
  if (!first || !last)
    throw UserError(fmt::format("\"{}\" is not a step range; write \"10-12\" to trace steps 10 to 12, \"10\" for step "
                                "10 alone (steps count from 1), or \"\" to trace nothing",
                                abbreviate(text)));
  if (*first > *last)
    throw UserError(fmt::format("\"{}\" ends before it begins; write the first step, then the last, e.g. \"{}-{}\"",
                                abbreviate(text), *last, *first));
  return StepRange{*first, *last};
}

std::string describe(const StepRange& range) {
  if (range.first == range.last) return fmt::format("step {}", range.first);
  return fmt::format("steps {}-{}", range.first, range.last);
}

}  // namespace ustrain
