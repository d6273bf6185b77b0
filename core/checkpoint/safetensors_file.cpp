#include "core/checkpoint/safetensors_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/checkpoint/safetensors_dtype.h"
#include "kernels/error.h"

namespace ustrain {

SafetensorsReader::SafetensorsReader(const std::string& path) : file_(path) {
  unsigned char prefix[8];
  if (file_.size() < 8)
    throw UserError(fmt::format("{} is truncated or not a safetensors file: it has only {} bytes", path,
                                file_.size()));
  file_.read_at(0, prefix, 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n > kMaxSafetensorsHeaderBytes)
    throw UserError(fmt::format("{} is not a safetensors file: its header would be {} bytes long", path, n));
  if (8 + n > file_.size())
    throw UserError(fmt::format("{} is truncated: its header needs {} bytes but the file has {}", path, 8 + n,
                                file_.size()));
  std::string json(static_cast<std::size_t>(n), '\0');
  file_.read_at(8, json.data(), json.size());
  header_ = decode_safetensors_header(json, path);
  // Compared without adding: data_bytes comes from the file and may be near 2^64.
  if (header_.data_bytes > file_.size() - header_.data_offset)
    throw UserError(fmt::format("{} is truncated: its tensors need {} bytes after the {}-byte header but the file "
                                "has {} in all; it was not written completely or was damaged",
                                path, header_.data_bytes, header_.data_offset, file_.size()));
  if (header_.data_bytes < file_.size() - header_.data_offset)
    throw UserError(fmt::format("{}: not a valid safetensors file: {} bytes follow the last tensor's data, which "
                                "belong to no tensor; the file is damaged",
                                path, file_.size() - header_.data_offset - header_.data_bytes));
}

void SafetensorsReader::read_bytes(const SafetensorsEntry& entry, std::uint64_t offset, void* dst,
                                   std::size_t bytes) const {
  USTRAIN_ASSERT(offset + bytes <= entry.end - entry.begin, "read past the end of " + entry.name);
  file_.read_at(header_.data_offset + entry.begin + offset, dst, bytes);
}

void SafetensorsReader::read_f32(const SafetensorsEntry& entry, float* dst) const {
  if (!converts_to_f32(entry.dtype))
    throw UserError(fmt::format("{}: tensor {} is {}; ustrain reads F32, BF16 and F16 tensors", path(), entry.name,
                                entry.dtype));
  const std::size_t bytes = entry.end - entry.begin;
  if (entry.dtype == "F32") {
    read_bytes(entry, 0, dst, bytes);
    return;
  }
  std::vector<unsigned char> raw(bytes);
  read_bytes(entry, 0, raw.data(), bytes);
  convert_to_f32(entry.dtype, raw.data(), dst, static_cast<std::size_t>(entry.numel()));
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                                     const SafetensorsMetadata& metadata)
    : file_(path) {
  const std::string header = encode_safetensors_header(entries, metadata);
  file_.write(header.data(), header.size());
  expected_end_ = header.size();
  for (const SafetensorsEntry& e : entries) expected_end_ = std::max<std::uint64_t>(expected_end_, header.size() + e.end);
}

void SafetensorsWriter::write(const void* data, std::size_t bytes) {
  USTRAIN_ASSERT(file_.bytes_written() + bytes <= expected_end_, "more data than the header declares");
  file_.write(data, bytes);
}

void SafetensorsWriter::finish() {
  USTRAIN_ASSERT(file_.bytes_written() == expected_end_, "less data than the header declares");
  file_.sync_and_close();
}

}  // namespace ustrain
