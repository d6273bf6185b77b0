// One HDF5 token shard on disk (format version 1; the layout is described in data/README.md).
// Every HDF5 failure becomes a UserError naming the shard; HDF5's own error printing is off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

inline constexpr int kShardFormatVersion = 1;

// The root-group attributes of a shard.
struct ShardHeader {
  int format_version = kShardFormatVersion;
  std::string tokenizer;
  std::int64_t vocab_size = 0;
  std::int32_t eos_id = 0;
  std::string source;  // where the text came from, for people reading the file
  std::int64_t token_count = 0;
};

// Tokens are stored as uint16 when vocab_size < 65536, else uint32.
bool shard_tokens_are_16_bit(std::int64_t vocab_size);

// Creates `path` (which must not exist). doc_offsets: start of each document that begins in
// this shard, then a final entry equal to tokens.size(). header.token_count is ignored (the
// token count is written). Ids must lie in [0, vocab_size).
void write_shard(const std::string& path, const ShardHeader& header,
                 const std::vector<std::int32_t>& tokens,
                 const std::vector<std::uint64_t>& doc_offsets);

ShardHeader read_shard_header(const std::string& path);

// Reads all of /tokens into out[0, header.token_count), checking its length against the
// attribute. Ids are not range-checked here.
void read_shard_tokens(const std::string& path, std::int32_t* out, std::int64_t count);

std::vector<std::uint64_t> read_shard_doc_offsets(const std::string& path);

}  // namespace ustrain
