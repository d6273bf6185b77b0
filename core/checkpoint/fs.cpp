#include "core/checkpoint/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Linux moves at most about 2 GiB per read or write call.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UserError(fmt::format("cannot create {}: {}", path_, std::strerror(errno)));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, std::min(bytes, kMaxChunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw UserError(fmt::format("cannot write {}: {} (is the disk full?)", path_,
                                  n < 0 ? std::strerror(errno) : "no progress"));
    p += n;
    bytes -= static_cast<std::size_t>(n);
    written_ += static_cast<std::uint64_t>(n);
  }
}

void OutputFile::sync_and_close() {
  if (::fsync(fd_) != 0) throw UserError(fmt::format("cannot flush {} to disk: {}", path_, std::strerror(errno)));
  const int status = ::close(fd_);
  fd_ = -1;
  if (status != 0) throw UserError(fmt::format("cannot close {}: {}", path_, std::strerror(errno)));
}

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  const OpenedFile file = open_regular_file(path_);
  fd_ = file.fd;
  size_ = file.bytes;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(std::uint64_t offset, void* dst, std::size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset)
    throw UserError(fmt::format("{} is truncated: it has {} bytes, but its contents reach byte {}; the file "
                                "was not written completely or was damaged",
                                path_, size_, offset + bytes));
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, std::min(bytes, kMaxChunk), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw UserError(fmt::format("cannot read {} at byte {}: {}", path_, offset,
                                  n < 0 ? std::strerror(errno) : "unexpected end of file"));
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  OutputFile out(path);
  out.write(text.data(), text.size());
  out.sync_and_close();
}

std::string read_text_file(const std::string& path) {
  InputFile in(path);
  std::string text(static_cast<std::size_t>(in.size()), '\0');
  in.read_at(0, text.data(), text.size());
  return text;
}

}  // namespace ustrain
