// Suggestions for a misspelt key or section: the nearest valid one, when it is near enough to
// be a plausible typo.
#include "core/recipe/recipe_schema.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ustrain {
namespace {

// Optimal string alignment distance: edits, with a swap of neighbours counting as one.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

constexpr std::size_t kLongestSuggestible = 64;

// A typo rather than a different word: one edit, or about a third of a longer word.
bool close_enough(std::size_t distance, std::string_view word) {
  return distance <= std::max<std::size_t>(1, word.size() / 3);
}

}  // namespace

std::optional<std::string> suggest_key(std::string_view dotted_key) {
  // No key is longer than this, nor within a few edits of anything longer: the edit distance
  // costs the product of the lengths, and a megabyte of key would take minutes.
  if (dotted_key.size() > kLongestSuggestible) return std::nullopt;
  const std::size_t dot = dotted_key.find('.');
  const std::string_view section = dotted_key.substr(0, dot);
  const std::string_view leaf = dot == std::string_view::npos ? dotted_key : dotted_key.substr(dot + 1);
  const KeySpec* best = nullptr;
  std::size_t best_distance = 0;
  for (const KeySpec& k : recipe_keys()) {
    // A right name in the wrong section costs one edit more than in its own.
    const std::size_t by_leaf = edit_distance(leaf, k.name()) + (k.section() == section ? 0 : 1);
    const std::size_t distance = std::min(edit_distance(dotted_key, k.key), by_leaf);
    if (best == nullptr || distance < best_distance) {
      best = &k;
      best_distance = distance;
    }
  }
  if (best == nullptr || !close_enough(best_distance, leaf)) return std::nullopt;
  return std::string(best->key);
}

std::optional<std::string> suggest_section(std::string_view name) {
  if (name.size() > kLongestSuggestible) return std::nullopt;
  const SectionSpec* best = nullptr;
  std::size_t best_distance = 0;
  for (const SectionSpec& s : recipe_sections()) {
    const std::size_t distance = edit_distance(name, s.name);
    if (best == nullptr || distance < best_distance) {
      best = &s;
      best_distance = distance;
    }
  }
  if (best == nullptr || !close_enough(best_distance, name)) return std::nullopt;
  return std::string(best->name);
}

}  // namespace ustrain
