#include "data/inputs/duplicate_inputs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/inputs/compressed_input.h"
#include "data/files/crc32.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

using FileId = std::pair<std::uint64_t, std::uint64_t>;  // (device, inode)

FileId file_id(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw UserError(fmt::format("cannot read input file {}: {}", path, std::strerror(errno)));
  return {static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino)};
}

bool is_link(const std::string& path) {
  std::error_code error;
  return fs::is_symlink(fs::symlink_status(path, error));
}

std::string why_same_file(const std::string& path, const std::string& kept) {
  if (is_link(path)) return fmt::format("a symbolic link to {}", kept);
  if (is_link(kept)) return fmt::format("the file that {}, a symbolic link read before, points to", kept);
  if (path == kept) return "named twice";
  return fmt::format("a hard link to {}", kept);
}

bool same_bytes(const std::string& a, const std::string& b) {
  using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;
  File fa(std::fopen(a.c_str(), "rb"), &std::fclose), fb(std::fopen(b.c_str(), "rb"), &std::fclose);
  if (!fa || !fb) throw UserError(fmt::format("cannot read input file {}: {}", fa ? b : a, std::strerror(errno)));
  std::vector<char> ba(1 << 16), bb(1 << 16);
  while (true) {
    const std::size_t na = std::fread(ba.data(), 1, ba.size(), fa.get());
    const std::size_t nb = std::fread(bb.data(), 1, bb.size(), fb.get());
    if (na != nb || std::memcmp(ba.data(), bb.data(), na) != 0) return false;
    if (na == 0) return true;
  }
}

// The decompressed content's size and CRC-32.
std::pair<std::uint64_t, std::uint32_t> content_digest(const std::string& path) {
  InputReader reader(path);
  std::vector<char> buffer(1 << 16);
  std::uint64_t size = 0;
  std::uint32_t crc = 0;
  while (const std::size_t n = reader.read(buffer.data(), buffer.size())) {
    size += n;
    crc = crc32_update(crc, buffer.data(), n);
  }
  return {size, crc};
}

// Fills `buffer` unless the content ends first (a read may return less before the end).
std::size_t read_full(InputReader& reader, std::vector<char>& buffer) {
  std::size_t filled = 0;
  while (filled < buffer.size()) {
    const std::size_t n = reader.read(buffer.data() + filled, buffer.size() - filled);
    if (n == 0) break;
    filled += n;
  }
  return filled;
}

bool same_content(const std::string& a, const std::string& b) {
  InputReader ra(a), rb(b);
  std::vector<char> ba(1 << 16), bb(1 << 16);
  while (true) {
    const std::size_t na = read_full(ra, ba), nb = read_full(rb, bb);
    if (na != nb || std::memcmp(ba.data(), bb.data(), na) != 0) return false;
    if (na == 0) return true;
  }
}

// `gzip -k a.jsonl` leaves a.jsonl beside a.jsonl.gz: a compressed file and the files named as
// it is without .gz / .zst are compared by their decompressed content. Only such groups are
// decompressed here, so that a directory of compressed files is not read twice.
std::vector<InputFile> drop_decompressed_repeats(const std::vector<InputFile>& files,
                                                 std::vector<DuplicateInput>& dropped) {
  std::map<std::string, int> per_name;  // the name without compression suffix -> files
  for (const InputFile& file : files) ++per_name[without_compression_suffix(file.path)];
  std::vector<InputFile> unique;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::vector<std::string>> by_content;  // (size, crc) -> kept
  for (const InputFile& file : files) {
    if (per_name[without_compression_suffix(file.path)] < 2) {
      unique.push_back(file);
      continue;
    }
    std::vector<std::string>& alike = by_content[content_digest(file.path)];
    const auto same = std::find_if(alike.begin(), alike.end(),
                                   [&](const std::string& other) { return same_content(file.path, other); });
    if (same != alike.end()) {
      dropped.push_back({file.path, fmt::format("the same content as {}, decompressed", *same)});
    } else {
      alike.push_back(file.path);
      unique.push_back(file);
    }
  }
  return unique;
}

}  // namespace

std::vector<InputFile> drop_duplicate_inputs(const std::vector<InputFile>& files,
                                             std::vector<DuplicateInput>& dropped) {
  std::vector<InputFile> kept;
  std::map<FileId, std::string> seen;  // the file -> the path it was kept under
  for (const InputFile& file : files) {
    const auto [at, fresh] = seen.emplace(file_id(file.path), file.path);
    if (fresh) kept.push_back(file);
    else dropped.push_back({file.path, why_same_file(file.path, at->second)});
  }
  // Only files whose size another one shares are read for their checksum.
  std::map<std::uint64_t, int> per_size;
  for (const InputFile& file : kept) ++per_size[file.bytes];
  std::vector<InputFile> unique;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::vector<std::string>> by_content;  // (size, crc) -> kept paths
  for (const InputFile& file : kept) {
    if (file.bytes == 0 || per_size[file.bytes] < 2) {
      unique.push_back(file);
      continue;
    }
    std::vector<std::string>& alike = by_content[{file.bytes, crc32_of_file(file.path)}];
    const auto same = std::find_if(alike.begin(), alike.end(),
                                   [&](const std::string& other) { return same_bytes(file.path, other); });
    if (same != alike.end()) {
      dropped.push_back({file.path, fmt::format("the same content as {}", *same)});
    } else {
      alike.push_back(file.path);
      unique.push_back(file);
    }
  }
  return drop_decompressed_repeats(unique, dropped);
}

std::string describe_duplicates(const std::vector<DuplicateInput>& dropped, std::size_t shown) {
  if (dropped.empty()) return "";
  std::vector<std::string> named;
  for (std::size_t i = 0; i < dropped.size() && i < shown; ++i)
    named.push_back(fmt::format("{} ({})", dropped[i].path, dropped[i].reason));
  return fmt::format("note: skipped {} input {} reached twice, so that no document is read twice: {}{}", dropped.size(),
                     dropped.size() == 1 ? "file" : "files", fmt::join(named, ", "),
                     dropped.size() > shown ? fmt::format(" and {} more", dropped.size() - shown) : std::string());
}

}  // namespace ustrain
