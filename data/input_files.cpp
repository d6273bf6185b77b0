#include "data/input_files.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

bool excluded(const fs::path& path, const std::vector<std::string>& exclude) {
  const std::string name = path.filename().string();
  return std::any_of(exclude.begin(), exclude.end(), [&](const std::string& glob) {
    return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
  });
}

InputFile describe(const fs::path& path) {
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (error) throw UserError(fmt::format("cannot read input file {}: {}", path.string(), error.message()));
  return {path.string(), static_cast<std::uint64_t>(size)};
}

std::vector<fs::path> files_below(const std::string& dir) {
  std::vector<fs::path> files;
  try {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
  } catch (const fs::filesystem_error& error) {
    throw UserError(fmt::format("cannot list input directory {}: {}", dir, error.what()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs,
                                        const std::vector<std::string>& exclude) {
  std::vector<InputFile> files;
  for (const std::string& input : inputs) {
    std::error_code error;
    const fs::file_status status = fs::status(input, error);
    if (fs::is_directory(status)) {
      for (const fs::path& path : files_below(input))
        if (!excluded(path, exclude)) files.push_back(describe(path));
    } else if (fs::is_regular_file(status)) {
      if (!excluded(input, exclude)) files.push_back(describe(input));
    } else if (!fs::exists(status)) {
      throw UserError(fmt::format("input {} does not exist: check the path", input));
    } else {
      throw UserError(fmt::format("input {} is neither a file nor a directory", input));
    }
  }
  return files;
}

}  // namespace ustrain
