#include "data/files/crc32.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "kernels/error.h"

namespace ustrain {

// zlib's CRC-32 is the standard variant, and fast (it folds several bytes a step).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t size) {
  return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), size));
}

std::uint32_t crc32_of_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw UserError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::vector<unsigned char> buffer(1 << 20);
  std::uint32_t crc = 0;
  while (std::size_t got = std::fread(buffer.data(), 1, buffer.size(), file.get()))
    crc = crc32_update(crc, buffer.data(), got);
  if (std::ferror(file.get())) throw UserError(fmt::format("error while reading {}", path));
  return crc;
}

std::string crc32_label(std::uint32_t crc) { return fmt::format("crc32:{:08x}", crc); }

}  // namespace ustrain
