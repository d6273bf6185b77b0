// Which files a conversion reads: the inputs expanded, directories recursively, in an order
// that does not depend on the filesystem (so a conversion is reproducible).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

struct InputFile {
  std::string path;
  std::uint64_t bytes = 0;
  bool in_directory = false;  // found below a directory input rather than named by the user
};

// Which files are taken, by base name, with fnmatch globs such as "*.txt".
struct NameFilter {
  std::vector<std::string> include;  // empty takes every name; else a name must match one
  std::vector<std::string> exclude;  // a name matching any is skipped

  bool accepts(const std::string& path) const;
  // " (only *.md *.txt, excluding *.dat)", or "" without globs: for messages.
  std::string describe() const;
};

// Each input in the given order: a file as is; a directory as all regular files below it,
// sorted by path. Files whose base name the filter refuses are skipped. UserError naming the
// input if it does not exist or cannot be listed.
std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs, const NameFilter& filter);

}  // namespace ustrain
