// Cuts one split's token stream into shard files "<split>-00000.h5", "<split>-00001.h5", ...
// of exactly `shard_tokens` tokens (the last one fewer). A document may continue into the next
// shard; each shard's doc_offsets lists the documents that start in it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/shards/dataset.h"
#include "data/shards/shard_file.h"

namespace ustrain {

class ShardWriter {
 public:
  // `header` gives the attributes every shard carries (its token_count is filled in per shard).
  ShardWriter(std::string dir, Split split, ShardHeader header, std::int64_t shard_tokens,
              ShardWriteOptions options = {});

  // Starts a document with `tokens`; extend_document() appends more tokens to it.
  void add_document(std::span<const std::int32_t> tokens);
  void extend_document(std::span<const std::int32_t> tokens);

  // Writes the last, partly filled shard and returns every shard written, in order. Each shard
  // is closed and flushed to disk before its size and checksum are taken.
  std::vector<ShardInfo> finish();

  std::int64_t tokens() const { return tokens_; }
  std::int64_t documents() const { return documents_; }

 private:
  void write_buffered_shard();

  std::string dir_;
  Split split_;
  ShardHeader header_;
  std::size_t shard_tokens_;
  ShardWriteOptions options_;
  std::vector<std::int32_t> buffer_;
  std::vector<std::uint64_t> doc_offsets_;  // documents starting in the buffered shard
  std::vector<ShardInfo> shards_;
  std::int64_t tokens_ = 0;
  std::int64_t documents_ = 0;
};

}  // namespace ustrain
