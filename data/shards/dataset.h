// A tokenized dataset directory: manifest.json plus HDF5 shards per split (and, for a
// sentencepiece dataset, its tokenizer model), as written by `ustrain data convert`
// (format in data/README.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizers/tokenizer.h"

namespace ustrain {

enum class Split { train, val };
const char* split_name(Split split);  // "train" | "val"

struct ShardInfo {
  std::string file;            // name relative to the dataset directory, e.g. "train-00000.h5"
  std::int64_t tokens = 0;
  std::int64_t documents = 0;  // documents that start in this shard
  std::uint64_t bytes = 0;     // file size
  std::string checksum;        // "crc32:<8 hex digits>" of the whole file
};

class ShardedTokens;

class TokenDataset {
 public:
  // Opens a dataset directory; reads only the manifest and shard file sizes (never token
  // data). UserError on a missing dir/manifest, a corrupt manifest, a newer format version, a
  // missing or truncated shard (file size mismatch), an empty train split.
  static TokenDataset open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const TokenizerIdentity& tokenizer() const { return tokenizer_; }
  std::int64_t vocab_size() const { return tokenizer_.vocab_size; }
  std::int32_t eos_id() const { return tokenizer_.eos_id; }
  int format_minor() const { return format_minor_; }
  const std::string& source() const { return source_; }
  const std::string& compression() const { return compression_; }
  std::int64_t tokens(Split split) const;
  std::int64_t documents(Split split) const;
  const std::vector<ShardInfo>& shards(Split split) const;
  std::string shard_path(const ShardInfo& shard) const;

  // Reads every shard of the split (and the tokenizer model) in full and compares its
  // CRC-32 with the manifest, on up to `threads` threads. UserError naming the first bad file.
  void verify_checksums(Split split, int threads = 1) const;

  // The split's tokens, memory-mapped for reading from any thread. Opens each shard with HDF5
  // (on the calling thread) and checks its attributes against the manifest; reads no token
  // data. Ids are checked against vocab_size as they are read.
  std::shared_ptr<const ShardedTokens> open_tokens(Split split) const;

  // All tokens of a split, in order, as int32, read through HDF5. Verifies each shard's
  // checksum and attributes and that every id < vocab_size (UserError naming the shard).
  std::vector<std::int32_t> read_all(Split split) const;
  // The same for one shard of this dataset.
  std::vector<std::int32_t> read_shard(const ShardInfo& shard) const;

 private:
  TokenDataset() = default;
  void check_shard_header(const ShardInfo& shard) const;

  std::string dir_;
  TokenizerIdentity tokenizer_;
  int format_minor_ = 0;
  std::string source_;
  std::string compression_;
  std::vector<ShardInfo> train_;
  std::vector<ShardInfo> val_;
};

}  // namespace ustrain
