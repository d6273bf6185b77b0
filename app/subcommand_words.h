// The words of a command line that name subcommands, checked before CLI11 parses them: CLI11
// answers a mistyped command, or `ustrain help`, with only "A subcommand is required".
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ustrain::app {

struct SubcommandWords {
  std::vector<std::string> args;      // the arguments to parse (after argv[0])
  std::optional<std::string> error;   // a usage error to report instead of parsing
};

// `help` where a subcommand belongs asks for that level's help: `ustrain help data convert`
// and `ustrain data help convert` become `ustrain data convert --help`. A word where a
// subcommand is required that names none is an error suggesting the nearest name (by edit
// distance). Checking stops at the first option, since what follows may be its value.
SubcommandWords check_subcommand_words(const CLI::App& root, std::vector<std::string> args);

// Optimal string alignment distance: insertions, deletions, substitutions, and a swap of
// neighbours ("trian" -> "train") counting as one edit.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace ustrain::app
