// Where a shard's /tokens lie in its file, so that they can be read without HDF5 (which is
// not thread-safe) by the loader's background thread, from a memory map. Learned once
// through HDF5 when a shard opens. Compressed (filtered) tokens have no such place: they are
// decoded through HDF5 instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

// A run of consecutive tokens stored as they are in one place: the whole dataset when it is
// contiguous, one chunk when it is chunked.
struct TokenExtent {
  std::int64_t first_token = 0;   // index in /tokens of the extent's first token
  std::int64_t tokens = 0;        // tokens of the dataset in the extent
  std::uint64_t file_offset = 0;  // where its bytes start in the file
};

struct ShardLayout {
  int token_bytes = 2;             // little-endian unsigned ids of 2 or 4 bytes
  std::int64_t tokens = 0;
  bool filtered = false;           // compressed (any HDF5 filter): no extents, decode with HDF5
  std::int64_t extent_tokens = 0;  // tokens per extent (all but the last); 0 when none
  std::vector<TokenExtent> extents;
};

// UserError naming the shard if /tokens is not a 1-D little-endian uint16/uint32 dataset,
// has a compact or virtual layout, or has chunks missing.
ShardLayout read_shard_layout(const std::string& path);

// All of /tokens in their stored width (2 or 4 bytes each, little-endian), decoded by HDF5.
std::vector<unsigned char> read_shard_token_bytes(const std::string& path, const ShardLayout& layout);

}  // namespace ustrain
