// Suggestions for a misspelt key or section: the nearest valid one, when it is near enough to
// be a plausible typo.
#include "core/recipe/recipe_schema.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ustrain {
namespace {

// Optimal string alignment distance (edits, with a swap of neighbours counting as one) when
// it is at most `cap`; else some number above `cap`, found as soon as no row can come back
// under it. Three rolling rows: every unknown key is compared with each of the schema's keys.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t cap) {
  const std::size_t n = b.size() + 1;
  std::vector<std::size_t> rows(3 * n);
  std::size_t* before = rows.data();  // row i - 2
  std::size_t* above = before + n;    // row i - 1
  std::size_t* row = above + n;       // row i
  for (std::size_t j = 0; j < n; ++j) above[j] = j;
  std::size_t above_least = 0;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    std::size_t least = i;
    for (std::size_t j = 1; j < n; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({above[j] + 1, row[j - 1] + 1, above[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
      least = std::min(least, row[j]);
    }
    // A row's least is at least the lesser of the row above's and the one before's plus one:
    // once two rows in a row exceed the cap, every later one does.
    if (least > cap && above_least > cap) return cap + 1;
    above_least = least;
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

// The most edits that still make a typo of `word` rather than a different word: one, or about
// a third of a longer word.
std::size_t typo_limit(std::string_view word) { return std::max<std::size_t>(1, word.size() / 3); }

// The most edits a candidate may be away to be suggested: within the typo limit and nearer
// than the best found so far (of equal ones the first is kept).
std::size_t suggestion_cap(std::size_t limit, bool found, std::size_t best_distance) {
  return found ? std::min(limit, best_distance - 1) : limit;
}

}  // namespace

std::optional<std::string> suggest_key(std::string_view dotted_key) {
  // No key is longer than this, nor within a few edits of anything longer: the edit distance
  // costs the product of the lengths, and a megabyte of key would take minutes.
  if (dotted_key.size() > kLongestSuggestible) return std::nullopt;
  const std::size_t dot = dotted_key.find('.');
  const std::string_view section = dotted_key.substr(0, dot);
  const std::string_view leaf = dot == std::string_view::npos ? dotted_key : dotted_key.substr(dot + 1);
  const std::size_t limit = typo_limit(leaf);
  const KeySpec* best = nullptr;
  std::size_t best_distance = 0;
  for (const KeySpec& k : recipe_keys()) {
    if (best != nullptr && best_distance == 0) break;  // nothing comes nearer
    const std::size_t cap = suggestion_cap(limit, best != nullptr, best_distance);
    // A right name in the wrong section costs one edit more than in its own.
    const std::size_t other_section = k.section() == section ? 0 : 1;
    // Lengths alone may put a key beyond the cap.
    if (std::min(length_gap(dotted_key, k.key), length_gap(leaf, k.name()) + other_section) > cap) continue;
    const std::size_t by_leaf =
        other_section > cap ? cap + 1 : edit_distance(leaf, k.name(), cap - other_section) + other_section;
    const std::size_t distance = std::min(edit_distance(dotted_key, k.key, cap), by_leaf);
    if (distance <= cap) {
      best = &k;
      best_distance = distance;
    }
  }
  if (best == nullptr) return std::nullopt;
  return std::string(best->key);
}

std::optional<std::string> suggest_section(std::string_view name) {
  if (name.size() > kLongestSuggestible) return std::nullopt;
  const std::size_t limit = typo_limit(name);
  const SectionSpec* best = nullptr;
  std::size_t best_distance = 0;
  for (const SectionSpec& s : recipe_sections()) {
    if (best != nullptr && best_distance == 0) break;
    const std::size_t cap = suggestion_cap(limit, best != nullptr, best_distance);
    if (length_gap(name, s.name) > cap) continue;
    const std::size_t distance = edit_distance(name, s.name, cap);
    if (distance <= cap) {
      best = &s;
      best_distance = distance;
    }
  }
  if (best == nullptr) return std::nullopt;
  return std::string(best->name);
}

}  // namespace ustrain
