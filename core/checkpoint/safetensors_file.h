// Reading and writing safetensors files (format in core/checkpoint/safetensors.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/fs.h"
#include "core/checkpoint/safetensors.h"

namespace ustrain {

// Opens a file and checks its header against the file's size, so that a truncated file is
// reported when it is opened (UserError naming it), not when a tensor is read.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);

  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return file_.path(); }

  // `bytes` raw bytes of `entry`, starting `offset` bytes into it.
  void read_bytes(const SafetensorsEntry& entry, std::uint64_t offset, void* dst, std::size_t bytes) const;
  // The whole entry as float32 (from F32, BF16 or F16; UserError for other dtypes).
  void read_f32(const SafetensorsEntry& entry, float* dst) const;

 private:
  InputFile file_;
  SafetensorsHeader header_;
};

// Writes the header, then takes the data in entry order. finish() checks that every
// entry's bytes arrived, fsyncs and closes. Write under a temporary name and rename when
// finished: an interrupted writer leaves a file that is not complete.
class SafetensorsWriter {
 public:
  // `entries` must already be laid out (lay_out_entries).
  SafetensorsWriter(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                    const SafetensorsMetadata& metadata);

  void write(const void* data, std::size_t bytes);
  void finish();
  std::uint64_t file_bytes() const { return file_.bytes_written(); }

 private:
  OutputFile file_;
  std::uint64_t expected_end_ = 0;  // file size once all data is written
};

}  // namespace ustrain
