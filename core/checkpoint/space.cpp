#include "core/checkpoint/space.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kernels/error.h"
#include "kernels/host_name.h"
#include "kernels/tensor.h"

namespace ustrain {
void check_checkpoint_directory(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(root, ec)) && !fs::exists(root, ec))
    throw UserError(fmt::format("{} is a symbolic link to {}, which does not exist; create that directory or remove "
                                "the link",
                                root, fs::read_symlink(root, ec).string()));
  if (fs::exists(root, ec) && !fs::is_directory(root, ec))
    throw UserError(fmt::format("{} is not a directory, so no checkpoint could be saved there; move it away",
                                root));
  fs::create_directories(root, ec);
  if (ec) throw UserError(fmt::format("cannot create the checkpoint directory {}: {}", root, ec.message()));
  // Every rank writes its own file: each probes with a name of its own.
  const std::string probe = fmt::format("{}/.write-test-{}-{}", root, host_name(), ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw UserError(fmt::format("cannot write into the checkpoint directory {}: {}; fix its permissions or pick "
                                "another run.output_dir",
                                root, std::strerror(errno)));
  const bool written = ::write(fd, "ok", 2) == 2;
  const int error = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!written)
    throw UserError(fmt::format("cannot write into the checkpoint directory {}: {}", root, std::strerror(error)));
}

SpaceCheck check_space(const std::string& root, std::uint64_t checkpoint_bytes, std::uint64_t free) {
  SpaceCheck check;
  if (free < checkpoint_bytes)
    check.error = fmt::format("the filesystem of {} has {} free, less than the {} one checkpoint of this run takes; "
                              "free some space, or pick a run.output_dir on a larger filesystem",
                              root, format_bytes(free), format_bytes(checkpoint_bytes));
  else if (free / 2 < checkpoint_bytes)
    check.warning = fmt::format("the filesystem of {} has {} free, room for fewer than two checkpoints of {} (a save "
                                "writes the new one before it deletes an old one)",
                                root, format_bytes(free), format_bytes(checkpoint_bytes));
  return check;
}

std::optional<std::uint64_t> free_bytes(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

void check_checkpoint_space(const std::string& root, std::uint64_t checkpoint_bytes) {
  const std::optional<std::uint64_t> free = free_bytes(root);
  if (!free) return;
  const SpaceCheck check = check_space(root, checkpoint_bytes, *free);
  if (!check.error.empty()) throw UserError(check.error);
  if (!check.warning.empty()) spdlog::warn("{}", check.warning);
}

}  // namespace ustrain
