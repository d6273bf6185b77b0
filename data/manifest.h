// manifest.json, the table of contents of a dataset directory: format version, tokenizer,
// and the shards of each split. Written last by a conversion, so its presence means the
// shards it lists were complete on disk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ustrain {

inline constexpr int kDatasetFormatVersion = 1;
inline constexpr const char* kManifestFileName = "manifest.json";

struct Manifest {
  int format_version = kDatasetFormatVersion;
  std::string tokenizer;
  std::int64_t vocab_size = 0;
  std::int32_t eos_id = 0;
  std::string token_dtype;  // "uint16" | "uint32", informational
  std::string source;       // how the dataset was made, for people reading the file
  std::vector<ShardInfo> train;
  std::vector<ShardInfo> val;
};

// Writes `path` and flushes it to disk.
void write_manifest(const std::string& path, const Manifest& manifest);

// UserError naming `path` if it is missing, not JSON, of a newer format_version, or lacks a
// field. Does not look at the shards.
Manifest read_manifest(const std::string& path);

}  // namespace ustrain
