// One HDF5 token shard on disk (format 1.1; the layout is described in data/README.md):
// writing it, and reading it through HDF5 (attributes, tokens, document offsets).
// Every HDF5 failure becomes a UserError naming the shard. Not thread-safe (HDF5 is not).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizers/tokenizer.h"

namespace ustrain {

inline constexpr int kShardFormatVersion = 1;
inline constexpr int kShardFormatMinor = 1;

// The root-group attributes of a shard.
struct ShardHeader {
  int format_version = kShardFormatVersion;
  int format_minor = kShardFormatMinor;
  // kind, name, vocab_size, eos_id and model_checksum are stored; model_file is not.
  TokenizerIdentity tokenizer;
  std::string source;  // where the tokens came from, for people reading the file
  std::int64_t token_count = 0;
};

struct ShardWriteOptions {
  // 0 stores /tokens uncompressed; 1-9 adds the shuffle and deflate filters at that level
  // (the loader then decompresses the whole shard into memory when it opens it).
  int compression = 0;
};

// Tokens are stored as uint16 when vocab_size < 65536, else uint32.
bool shard_tokens_are_16_bit(std::int64_t vocab_size);
// /tokens is stored in chunks of 1 MiB.
std::int64_t shard_chunk_tokens(std::int64_t vocab_size);

// Creates `path` (which must not exist). doc_offsets: start of each document that begins in
// this shard, then a final entry equal to tokens.size(). header.token_count is ignored (the
// token count is written). Ids must lie in [0, vocab_size). The same input gives the same
// bytes (no timestamps are stored).
void write_shard(const std::string& path, const ShardHeader& header,
                 const std::vector<std::int32_t>& tokens,
                 const std::vector<std::uint64_t>& doc_offsets, const ShardWriteOptions& options = {});

ShardHeader read_shard_header(const std::string& path);

// Reads all of /tokens into out[0, count), checking its length against `count`. Ids are not
// range-checked here.
void read_shard_tokens(const std::string& path, std::int32_t* out, std::int64_t count);

std::vector<std::uint64_t> read_shard_doc_offsets(const std::string& path);

}  // namespace ustrain
