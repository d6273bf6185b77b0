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

// An entry below a directory input that is not read, and why ("a symbolic link that loops").
struct SkippedEntry {
  std::string path;
  std::string reason;
};

// Each input in the given order: a file as is; a directory as all regular files below it,
// sorted by path. Files whose base name the filter refuses are skipped. Entries below a
// directory that are no regular file (a dangling or looping symbolic link, a link to a
// directory, a FIFO, a socket, a device) are left out and added to `skipped` when given, with
// the reason, sorted by path. UserError naming the input if it does not exist or cannot be listed.
std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs, const NameFilter& filter,
                                        std::vector<SkippedEntry>* skipped = nullptr);

// "skipped 2 entries that are not regular files: a/fifo (a FIFO), a/loop (a symbolic link
// that cannot be resolved: Too many levels of symbolic links)", naming at most `shown`.
std::string describe_skipped(const std::vector<SkippedEntry>& skipped, std::size_t shown = 20);

}  // namespace ustrain
