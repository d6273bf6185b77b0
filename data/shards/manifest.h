// manifest.json, the table of contents of a dataset directory: format version, tokenizer,
// and the shards of each split. Written last by a conversion, so its presence means the
// shards it lists were complete on disk. Reading it touches no token data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shards/dataset.h"
#include "data/tokenizers/tokenizer.h"

namespace ustrain {

// Major version: a reader refuses a newer one. Minor version: additions old readers may ignore.
inline constexpr int kDatasetFormatVersion = 1;
inline constexpr int kDatasetFormatMinor = 1;
inline constexpr const char* kManifestFileName = "manifest.json";

struct Manifest {
  int format_version = kDatasetFormatVersion;
  int format_minor = kDatasetFormatMinor;
  TokenizerIdentity tokenizer;
  std::string token_dtype;  // "uint16" | "uint32", informational
  std::string compression;  // "none" | "deflate:<level>", informational
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
