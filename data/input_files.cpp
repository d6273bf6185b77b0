#include "data/input_files.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/path_status.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

bool matches_any(const std::string& name, const std::vector<std::string>& globs) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& glob) { return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0; });
}

InputFile describe(const fs::path& path, bool in_directory) {
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (error) throw UserError(fmt::format("cannot read input file {}: {}", path.string(), error.message()));
  return {path.string(), static_cast<std::uint64_t>(size), in_directory};
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

bool NameFilter::accepts(const std::string& path) const {
  const std::string name = fs::path(path).filename().string();
  return (include.empty() || matches_any(name, include)) && !matches_any(name, exclude);
}

std::string NameFilter::describe() const {
  if (include.empty() && exclude.empty()) return "";
  std::string text = include.empty() ? "" : fmt::format("only {}", fmt::join(include, " "));
  if (!exclude.empty()) text += fmt::format("{}excluding {}", text.empty() ? "" : ", ", fmt::join(exclude, " "));
  return " (" + text + ")";
}

std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs, const NameFilter& filter) {
  std::vector<InputFile> files;
  for (const std::string& input : inputs) {
    std::error_code error;
    const fs::file_status status = fs::status(input, error);
    if (fs::is_directory(status)) {
      for (const fs::path& path : files_below(input))
        if (filter.accepts(path.string())) files.push_back(describe(path, /*in_directory=*/true));
    } else if (fs::is_regular_file(status)) {
      if (filter.accepts(input)) files.push_back(describe(input, /*in_directory=*/false));
    } else if (const PathStatus why = path_status(input); why.access != PathAccess::exists) {
      throw UserError(fmt::format("input {} {}: check the path{}", input, describe_unusable(why),
                                  why.access == PathAccess::unreachable ? " and its permissions" : ""));
    } else {
      throw UserError(fmt::format("input {} is neither a file nor a directory", input));
    }
  }
  return files;
}

}  // namespace ustrain
