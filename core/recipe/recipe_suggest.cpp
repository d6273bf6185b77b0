// Suggestions for a misspelt key or section: the nearest valid one, when it is near enough to
// be a plausible typo.
#include "core/recipe/recipe_schema.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ustrain {
namespace {

// Optimal string alignment distance: edits, with a swap of neighbours counting as one. Three
// rolling rows: a suggestion for every unknown key compares it with each of the schema's keys.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = b.size() + 1;
  std::vector<std::size_t> rows(3 * n);
  std::size_t* before = rows.data();  // row i - 2
  std::size_t* above = before + n;    // row i - 1
  std::size_t* row = above + n;       // row i
  for (std::size_t j = 0; j < n; ++j) above[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j < n; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({above[j] + 1, row[j - 1] + 1, above[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, above);  // the old row i - 2 becomes the next row's buffer
    std::swap(above, row);
  }
  return above[b.size()];
}

// A lower bound of edit_distance(a, b): each extra character costs an insertion or deletion.
std::size_t length_gap(std::string_view a, std::string_view b) {
  return a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
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
    const std::size_t other_section = k.section() == section ? 0 : 1;
    // A key whose length alone puts it too far to suggest, or no nearer than the best so far,
    // cannot be the suggestion.
    const std::size_t at_least = std::min(length_gap(dotted_key, k.key), length_gap(leaf, k.name()) + other_section);
    if (!close_enough(at_least, leaf) || (best != nullptr && at_least >= best_distance)) continue;
    // A right name in the wrong section costs one edit more than in its own.
    const std::size_t by_leaf = edit_distance(leaf, k.name()) + other_section;
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
    const std::size_t at_least = length_gap(name, s.name);
    if (!close_enough(at_least, name) || (best != nullptr && at_least >= best_distance)) continue;
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
