// The files a training run writes into its run directory (recipe.toml, train.log,
// metrics.jsonl, run.json and their staging copies, run.lock, trace/*.json) are never written
// through a symbolic link: the trainer often runs as root or in a shared directory, and
// following a link would truncate or append to whatever it points to. One rule for all of them:
// a name that exists as anything but a regular file (a symbolic link, a FIFO, a directory, a
// device) is refused with one message saying to remove it, and every open uses O_NOFOLLOW, so
// that a link put there after the check is refused as well. What a link points to is never
// touched. (TensorBoard event files are created with O_EXCL under a new name, which never
// follows a link either.)
#pragma once

#include <sys/types.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace ustrain {

// UserError when `path` exists and is not a regular file: "WHAT PATH is a symbolic link, not a
// regular file: remove it ...". `what` names the file for the user ("the run lock"; empty: none).
void check_run_file(const std::string& path, std::string_view what = {});
// check_run_file on each of `names` in `dir`: before a run changes anything in its directory.
void check_run_files(const std::string& dir, std::initializer_list<const char*> names);
// The same refusal for a file whose type is already known (st_mode of lstat or fstat).
[[noreturn]] void refuse_run_file(const std::string& path, mode_t mode, std::string_view what = {});

// A file of the run directory opened for writing without following a link.
class RunFile {
 public:
  enum class Mode { replace, append };
  // Creates the file (mode replace truncates it; append writes at its end). UserError when it
  // is not a regular file or cannot be opened.
  RunFile(std::string path, Mode mode);
  ~RunFile();
  RunFile(const RunFile&) = delete;
  RunFile& operator=(const RunFile&) = delete;

  // Writes all of `text`: 0, or the errno of the write that failed (ENOSPC on a full disk).
  int write(std::string_view text);
  // fsync: 0, or its errno.
  int sync();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Replaces the contents of `path` with `text` (never through a link); `durable`: fsynced too.
// UserError naming the file when it cannot be written.
void write_run_file(const std::string& path, std::string_view text, bool durable);

}  // namespace ustrain
