#include "data/inputs/input_files.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/files/path_status.h"
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

// Why an entry below a directory is not read, or nullopt for a regular file (or a link to
// one) and a directory, which the listing enters.
std::optional<std::string> not_a_file(const fs::directory_entry& entry) {
  std::error_code error;
  const fs::file_status own = entry.symlink_status(error);
  if (error) return fmt::format("cannot be examined: {}", error.message());
  if (fs::is_directory(own)) return std::nullopt;
  const bool link = fs::is_symlink(own);
  const fs::file_status target = link ? entry.status(error) : own;
  if (link && error && error != std::errc::no_such_file_or_directory)
    return fmt::format("a symbolic link that cannot be resolved: {}", error.message());
  if (link && !fs::exists(target)) return std::string("a dangling symbolic link");
  if (fs::is_regular_file(target)) return std::nullopt;
  if (link && fs::is_directory(target)) return std::string("a symbolic link to a directory, not followed");
  const std::string kind = fs::is_fifo(target)                                              ? "a FIFO"
                           : fs::is_socket(target)                                          ? "a socket"
                           : fs::is_block_file(target) || fs::is_character_file(target) ? "a device file"
                                                                                            : "not a regular file";
  return link ? "a symbolic link to " + kind : kind;
}

std::vector<fs::path> files_below(const std::string& dir, const NameFilter& filter,
                                  std::vector<SkippedEntry>* skipped) {
  std::vector<fs::path> files;
  std::vector<SkippedEntry> left_out;
  try {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir)) {
      if (const std::optional<std::string> why = not_a_file(entry)) {
        if (filter.accepts(entry.path().string())) left_out.push_back({entry.path().string(), *why});
      } else if (std::error_code error; !entry.is_directory(error)) {
        files.push_back(entry.path());
      }
    }
  } catch (const fs::filesystem_error& error) {
    throw UserError(fmt::format("cannot list input directory {}: {}", dir, error.what()));
  }
  std::sort(files.begin(), files.end());
  std::sort(left_out.begin(), left_out.end(),
            [](const SkippedEntry& a, const SkippedEntry& b) { return a.path < b.path; });
  if (skipped) skipped->insert(skipped->end(), left_out.begin(), left_out.end());
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

std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs, const NameFilter& filter,
                                        std::vector<SkippedEntry>* skipped) {
  std::vector<InputFile> files;
  for (const std::string& input : inputs) {
    std::error_code error;
    const fs::file_status status = fs::status(input, error);
    if (fs::is_directory(status)) {
      for (const fs::path& path : files_below(input, filter, skipped))
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

std::string describe_skipped(const std::vector<SkippedEntry>& skipped, std::size_t shown) {
  if (skipped.empty()) return "";
  std::vector<std::string> named;
  for (std::size_t i = 0; i < skipped.size() && i < shown; ++i)
    named.push_back(fmt::format("{} ({})", skipped[i].path, skipped[i].reason));
  return fmt::format("skipped {} {} that {} not regular files: {}{}", skipped.size(),
                     skipped.size() == 1 ? "entry" : "entries", skipped.size() == 1 ? "is" : "are",
                     fmt::join(named, ", "),
                     skipped.size() > shown ? fmt::format(" and {} more", skipped.size() - shown) : std::string());
}

}  // namespace ustrain
