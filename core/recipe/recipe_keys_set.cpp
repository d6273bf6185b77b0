// keys_set_by_hand: which keys a user chose, for the commands that treat those apart from the
// defaults (`ustrain plan` keeps the parallel.* keys set by hand and searches the others).
#include <toml++/toml.h>

#include <string_view>

#include "core/recipe/recipe.h"

namespace ustrain {
namespace {

std::string_view trimmed(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

std::set<std::string> keys_set_by_hand(const std::string& path, const std::vector<std::string>& overrides) {
  std::set<std::string> keys;
  try {
    const toml::table doc = toml::parse_file(path);
    for (auto&& [section, node] : doc)
      if (const toml::table* table = node.as_table())
        for (auto&& [key, value] : *table) keys.insert(std::string(section.str()) + "." + std::string(key.str()));
  } catch (const toml::parse_error&) {
    // load_recipe read the file first and would have said what is wrong with it.
  }
  keys.merge(override_keys(overrides));
  return keys;
}

std::set<std::string> override_keys(const std::vector<std::string>& overrides) {
  std::set<std::string> keys;
  for (const std::string& assignment : overrides)
    keys.insert(std::string(trimmed(std::string_view(assignment).substr(0, assignment.find('=')))));
  return keys;
}

}  // namespace ustrain
