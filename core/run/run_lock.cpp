#include "core/run/run_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "core/run/run_file.h"
#include "kernels/error.h"
#include "kernels/host_name.h"

namespace ustrain {
namespace {

// The holder's record ("host NAME pid N"), as much of it as the holder has written, safe to
// print: anyone may have written the file, so a byte outside printable ASCII (a NUL, an escape
// sequence) is shown as \xNN.
std::string read_holder(int fd) {
  char text[256] = {};
  const ssize_t n = ::pread(fd, text, sizeof text, 0);
  std::string raw = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
  while (!raw.empty() && (raw.back() == '\n' || raw.back() == '\0')) raw.pop_back();
  std::string holder;
  for (const char c : raw) {
    const auto byte = static_cast<unsigned char>(c);
    holder += byte >= 0x20 && byte < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", byte);
  }
  return holder;
}

// Refuses a run.lock that is not a regular file: a symbolic link (the trainer, often root,
// would truncate its target), a FIFO or a device (core/run/run_file.h).
void check_regular(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) refuse_run_file(path, st.st_mode, "the run lock");
}

}  // namespace

RunLock::RunLock(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw UserError(fmt::format("cannot create run directory {}: {}", run_dir, ec.message()));
  const std::string path = run_dir + "/" + kRunLockName;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) check_regular(st, path);  // before open() touches a device
  // O_NOFOLLOW: a symbolic link put there after the check is refused as well (ELOOP).
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0 && errno == ELOOP) {
    st.st_mode = S_IFLNK;
    check_regular(st, path);
  }
  if (fd_ < 0) throw UserError(fmt::format("cannot open the run lock {}: {}", path, std::strerror(errno)));
  if (::fstat(fd_, &st) != 0) st.st_mode = 0;  // unknown: refused as not regular
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    check_regular(st, path);
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? read_holder(fd_) : std::string();
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK)
      throw UserError(fmt::format("cannot lock the run directory {} ({}): {}", run_dir, path, std::strerror(error)));
    throw UserError(fmt::format("run directory {} is in use by another trainer ({}); wait for it to finish or stop "
                                "it, or pick another run.name (--set run.name=NEW)",
                                run_dir, holder.empty() ? "which has not yet written its host and pid" : holder));
  }
  const std::string record = fmt::format("host {} pid {}\n", host_name(), ::getpid());
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw UserError(fmt::format("cannot write the run lock {}: {}", path, std::strerror(error)));
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

RunLock::RunLock(RunLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

}  // namespace ustrain
