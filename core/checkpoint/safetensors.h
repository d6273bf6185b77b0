// safetensors, the tensor file format of the Hugging Face ecosystem. ustrain writes its
// checkpoint shards and its model exports in it and imports Hugging Face models from it.
//
// A file is: an unsigned 64-bit little-endian N; N bytes of JSON header
//   {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"KEY": "VALUE", ...}}        (optional; string values only)
// padded with spaces so that the data starts at a multiple of 8 bytes; then the raw
// little-endian tensor data, row-major, offsets counted from the end of the header.
// This file holds the header's encoding and its checks; safetensors_file.h reads and writes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ustrain {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;                 // as the file spells it: "F32", "BF16", "F16", "I64", ...
  std::vector<std::int64_t> shape;   // empty for a scalar
  std::uint64_t begin = 0, end = 0;  // [begin, end) in bytes, relative to the data section

  std::int64_t numel() const;
};

using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by data offset
  SafetensorsMetadata metadata;
  std::uint64_t data_offset = 0;  // file offset of the data section: 8 + N
  std::uint64_t data_bytes = 0;   // the end of the last entry: the data section's size

  const SafetensorsEntry* find(std::string_view name) const;
};

// Bytes per element of a safetensors dtype name, 0 when ustrain does not know it.
std::size_t safetensors_dtype_size(std::string_view dtype);

// Gives the entries back-to-back data offsets in their order; returns the data size.
std::uint64_t lay_out_entries(std::vector<SafetensorsEntry>& entries);

// The bytes before the data: the length prefix and the space-padded JSON header, entries
// in their given order.
std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const SafetensorsMetadata& metadata);

// Parses a header's JSON (the N bytes after the prefix) and checks it: known dtypes,
// non-negative shapes, offsets that match dtype and shape, every entry (empty ones and ones a
// reader ignores included) back to back from byte 0, so that no two share a byte.
// `file` names the file in the UserError.
SafetensorsHeader decode_safetensors_header(std::string_view json, const std::string& file);

// The most header bytes a reader accepts (the reference implementation's limit).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

}  // namespace ustrain
