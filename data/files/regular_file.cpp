#include "data/files/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
const char* file_kind(unsigned mode) {
  return S_ISLNK(mode)                    ? "a symbolic link"
         : S_ISREG(mode)                  ? "a regular file"
         : S_ISDIR(mode)                  ? "a directory"
         : S_ISFIFO(mode)                 ? "a FIFO (named pipe)"
         : S_ISSOCK(mode)                 ? "a socket"
         : S_ISCHR(mode) || S_ISBLK(mode) ? "a device file"
                                          : "not a regular file";
}

OpenedFile open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer; it changes
  // nothing for a regular file, and the descriptor of anything else is closed below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw UserError(fmt::format("cannot open {}: {}; check the path and its permissions", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw UserError(fmt::format("cannot examine {}: {}", path, std::strerror(error)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(fmt::format("{} is {}, not a regular file: name the file itself", path, file_kind(st.st_mode)));
  }
  return {fd, static_cast<std::uint64_t>(st.st_size)};
}

std::string read_regular_file(const std::string& path) {
  const int fd = open_regular_file(path).fd;
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw UserError(fmt::format("cannot read {}: {}", path, std::strerror(error)));
    }
    if (n == 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace ustrain
