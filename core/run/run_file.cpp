#include "core/run/run_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {

void refuse_run_file(const std::string& path, mode_t mode, std::string_view what) {
  throw UserError(fmt::format("{}{}{} is {}, not a regular file: remove it (ustrain writes its own, never through a "
                              "link, and leaves what a link points to alone) and start again",
                              what, what.empty() ? "" : " ", path, file_kind(mode)));
}

void check_run_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) refuse_run_file(path, st.st_mode, what);
}

void check_run_files(const std::string& dir, std::initializer_list<const char*> names) {
  for (const char* name : names) check_run_file(dir + "/" + name);
}

RunFile::RunFile(std::string path, Mode mode) : path_(std::move(path)) {
  check_run_file(path_);  // before open() touches a FIFO or a device
  const int how = mode == Mode::append ? O_APPEND : O_TRUNC;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | how, 0644);
  if (fd_ < 0 && errno == ELOOP) refuse_run_file(path_, S_IFLNK);  // a link put there since the check
  if (fd_ < 0) throw UserError(fmt::format("cannot open {} for writing: {}", path_, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    refuse_run_file(path_, st.st_mode);
  }
}

RunFile::~RunFile() {
  if (fd_ >= 0) ::close(fd_);
}

int RunFile::write(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

int RunFile::sync() { return ::fsync(fd_) == 0 ? 0 : errno; }

void write_run_file(const std::string& path, std::string_view text, bool durable) {
  RunFile file(path, RunFile::Mode::replace);
  int error = file.write(text);
  if (error == 0 && durable) error = file.sync();
  if (error != 0)
    throw UserError(fmt::format("cannot write {}: {}{}", path, std::strerror(error),
                                error == ENOSPC ? "; free space on that filesystem" : " (is the disk full?)"));
}

}  // namespace ustrain
