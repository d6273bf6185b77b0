#include "app/subcommand_words.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "kernels/error.h"

namespace ustrain::app {
namespace {

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

const CLI::App* find_subcommand(const CLI::App& app, const std::string& word) {
  for (const CLI::App* sub : subcommands_of(app))
    if (sub->check_name(word)) return sub;
  return nullptr;
}

// No command is longer, nor within a few edits of anything longer; the edit distance costs the
// product of the lengths.
constexpr std::size_t kLongestSuggestible = 64;

std::string unknown_word(const CLI::App& app, const std::string& path, const std::string& given) {
  std::vector<std::string> names;
  const std::string* nearest = nullptr;
  std::size_t nearest_distance = 0;
  const std::string word = abbreviate(given);
  for (const CLI::App* sub : subcommands_of(app)) {
    names.push_back(sub->get_name());
    if (given.size() > kLongestSuggestible) continue;
    const std::size_t distance = edit_distance(given, sub->get_name());
    if (nearest == nullptr || distance < nearest_distance) {
      nearest = &sub->get_name();
      nearest_distance = distance;
    }
  }
  // A typo rather than another word: one edit, or about a third of a longer word.
  if (nearest != nullptr && nearest_distance <= std::max<std::size_t>(1, word.size() / 3))
    return fmt::format("'{}' is not a command of {}; did you mean '{}'? ({} --help lists the commands)", word, path,
                       *nearest, path);
  return fmt::format("'{}' is not a command of {}: use one of {} ({} --help says more)", word, path,
                     fmt::join(names, ", "), path);
}

}  // namespace

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

SubcommandWords check_subcommand_words(const CLI::App& root, std::vector<std::string> args) {
  const CLI::App* app = &root;
  std::string path = root.get_name().empty() ? "ustrain" : root.get_name();
  for (std::size_t i = 0; i < args.size();) {
    const std::string word = args[i];
    if (word.empty() || word.front() == '-' || subcommands_of(*app).empty()) break;
    if (const CLI::App* sub = find_subcommand(*app, word)) {
      app = sub;
      path += " " + word;
      ++i;
    } else if (word == "help") {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      args.push_back("--help");
    } else if (app->get_require_subcommand_min() > 0) {
      return {std::move(args), unknown_word(*app, path, word)};
    } else {
      break;  // a positional argument of a command that also has subcommands
    }
  }
  return {std::move(args), std::nullopt};
}

}  // namespace ustrain::app
