// Writing a directory so that readers never see it half-done: files are fsynced, and the whole
// directory is built under a temporary sibling name and renamed into place when complete.
#pragma once

#include <string>
#include <vector>

namespace ustrain {

// fsync of a file or directory; UserError naming it on failure.
void fsync_path(const std::string& path);

// A directory built under "<final>.incomplete-<host>-<pid>" next to its final path. commit()
// renames it into place; if it is destroyed uncommitted (an error or exception midway), it is
// removed. A process killed outright leaves the ".incomplete-" directory behind, never `final`;
// remove_stale_staging() clears those up later.
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

// Removes the staging directories of `final_dir` (see StagedDirectory) whose process is gone:
// left behind by a process killed outright, they can be hundreds of megabytes each. One whose
// process still runs is kept, and so is one made on another host (the output may lie on a
// shared filesystem), whose processes cannot be checked from here; names without a host, from
// older versions, count as this host's. Returns one line per directory removed or kept, for
// the user.
std::vector<std::string> remove_stale_staging(const std::string& final_dir);

}  // namespace ustrain
