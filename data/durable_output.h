// Writing a directory so that readers never see it half-done: files are fsynced, and the whole
// directory is built under a temporary sibling name and renamed into place when complete.
#pragma once

#include <string>

namespace ustrain {

// fsync of a file or directory; UserError naming it on failure.
void fsync_path(const std::string& path);

// A directory built under "<final>.incomplete-<pid>" next to its final path. commit() renames
// it into place; if it is destroyed uncommitted (an error or exception midway), it is removed.
// A process killed outright leaves the ".incomplete-" directory behind, never `final`.
class StagedDirectory {
 public:
  // UserError (with advice) if `final_dir` exists and is not an empty directory.
  explicit StagedDirectory(const std::string& final_dir);
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;
  ~StagedDirectory();

  const std::string& path() const { return staging_; }
  const std::string& final_path() const { return final_; }

  // Flushes the staging directory, renames it to the final path and flushes the parent.
  void commit();

 private:
  std::string final_;
  std::string staging_;
  bool committed_ = false;
};

}  // namespace ustrain
