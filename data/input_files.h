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
};

// Each input in the given order: a file as is; a directory as all regular files below it,
// sorted by path. Files whose base name matches any `exclude` glob (fnmatch syntax, e.g. "*.dat")
// are skipped. UserError naming the input if it does not exist or cannot be listed.
std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs,
                                        const std::vector<std::string>& exclude);

}  // namespace ustrain
