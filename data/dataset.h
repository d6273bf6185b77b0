// A tokenized dataset directory: manifest.json plus HDF5 shards per split, as written by
// convert_text (format in data/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

class TokenDataset {
 public:
  // Opens a dataset directory written by convert_text; reads only the manifest and shard
  // file sizes (never token data). UserError on a missing dir/manifest, a corrupt manifest, a
  // newer format version, a missing or truncated shard (file size mismatch), an empty train split.
  static TokenDataset open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string tokenizer() const { return tokenizer_; }
  std::int64_t vocab_size() const { return vocab_size_; }
  std::int32_t eos_id() const { return eos_id_; }
  std::int64_t tokens(Split split) const;
  const std::vector<ShardInfo>& shards(Split split) const;

  // All tokens of a split, in order (documents already joined with EOS), as int32.
  // Verifies each shard's checksum and attributes and that every id < vocab_size (UserError
  // naming the shard otherwise).
  std::vector<std::int32_t> read_all(Split split) const;

 private:
  TokenDataset() = default;

  std::string dir_;
  std::string tokenizer_;
  std::int64_t vocab_size_ = 0;
  std::int32_t eos_id_ = 0;
  std::vector<ShardInfo> train_;
  std::vector<ShardInfo> val_;
};

}  // namespace ustrain
