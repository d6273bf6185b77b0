// The recipe written out: as TOML with every key and its meaning, as key-value pairs, and
// as the Markdown reference of every key.
#include "core/recipe/recipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/recipe/recipe_schema.h"

namespace ustrain {
namespace {

// The meaning of a key followed by what it accepts, for comments and the reference.
std::string explain(const KeySpec& spec) {
  const std::string allowed = describe_allowed(spec);
  return allowed.empty() ? std::string(spec.meaning)
                         : fmt::format("{} ({})", spec.meaning, allowed);
}

// A '|' would end the table cell early.
std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (char c : text) {
    if (c == '|') cell += '\\';
    cell += c;
  }
  return cell;
}

}  // namespace

std::string to_toml(const Recipe& r) {
  std::string out = "# ustrain recipe, resolved: every key is present, defaults filled in.\n";
  for (const SectionSpec& section : recipe_sections()) {
    std::vector<std::pair<std::string, std::string>> lines;  // (key = value, comment)
    std::size_t width = 0;
    for (const KeySpec& spec : recipe_keys()) {
      if (spec.section() != section.name) continue;
      lines.emplace_back(fmt::format("{} = {}", spec.name(), toml_literal(read_field(spec, r))),
                         explain(spec));
      width = std::max(width, lines.back().first.size());
    }
    out += fmt::format("\n[{}]  # {}\n", section.name, section.meaning);
    for (const auto& [assignment, comment] : lines) {
      out += fmt::format("{:<{}}  # {}\n", assignment, width, comment);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> recipe_values(const Recipe& r) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const KeySpec& spec : recipe_keys()) values.emplace_back(std::string(spec.key), toml_literal(read_field(spec, r)));
  return values;
}

std::string recipe_reference_markdown() {
  const Recipe defaults;
  std::string out;
  for (const SectionSpec& section : recipe_sections()) {
    if (!out.empty()) out += "\n";
    out += fmt::format("### [{}]\n\n{}.\n\n| key | type | default | meaning |\n|---|---|---|---|\n",
                       section.name, section.meaning);
    for (const KeySpec& spec : recipe_keys()) {
      if (spec.section() != section.name) continue;
      out += fmt::format("| `{}` | {} | `{}` | {} |\n", spec.key, value_type_name(spec.type),
                         markdown_cell(toml_literal(read_field(spec, defaults))),
                         markdown_cell(explain(spec)));
    }
  }
  return out;
}

}  // namespace ustrain
