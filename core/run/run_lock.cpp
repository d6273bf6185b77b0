#include "core/run/run_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "kernels/error.h"
#include "kernels/host_name.h"

namespace ustrain {
namespace {

// The holder's record ("host NAME pid N"), as much of it as the holder has written.
std::string read_holder(int fd) {
  char text[512] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder;
}

}  // namespace

RunLock::RunLock(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw UserError(fmt::format("cannot create run directory {}: {}", run_dir, ec.message()));
  const std::string path = run_dir + "/" + kRunLockName;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UserError(fmt::format("cannot open the run lock {}: {}", path, std::strerror(errno)));
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
