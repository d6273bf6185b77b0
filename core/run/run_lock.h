// An exclusive lock on a run directory for the life of a training run, so that a second
// trainer on the same run (a double submit, an overlapping requeue) is refused instead of
// deleting the first one's saves and mixing its metrics in.
//
// The lock is flock(2) on RUN_DIR/run.lock, which the kernel releases when the process ends
// however it ends, so a run restarted after a crash or kill -9 takes it again at once. The
// file holds the holder's host and pid, for the refusal message; it stays behind between runs.
// On NFS, Linux implements flock with byte-range locks, which the server sees from every client.
// A run.lock that is not a regular file (a symbolic link to somewhere else, a FIFO, a device)
// is refused, never followed or written; the holder's record is shown with its unprintable
// bytes escaped.
#pragma once

#include <string>

namespace ustrain {

inline constexpr const char* kRunLockName = "run.lock";

class RunLock {
 public:
  // Creates `run_dir` if needed and takes its lock. UserError naming the directory and, when
  // another process holds the lock, that process's host and pid; or the path and the cause
  // when the directory or the file cannot be created.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace ustrain
