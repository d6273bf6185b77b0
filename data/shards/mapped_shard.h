// A shard's tokens read straight from a read-only memory map of its file, at the offsets
// HDF5 reported when the shard was opened (data/shards/shard_layout.h). Reading touches no HDF5, so
// the loader's background thread can read while the training thread writes checkpoints with
// HDF5. The file must not change while it is mapped.
//
// Compressed shards cannot be read that way: their tokens are decompressed by HDF5 when the
// shard is opened (on the opening thread) and held in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/shards/shard_layout.h"
#include "data/shards/token_source.h"

namespace ustrain {

class MappedShard {
 public:
  // UserError naming `path` if it cannot be opened or an extent of `layout` lies outside the
  // file. Ids read later are checked against `vocab_size`.
  MappedShard(std::string path, ShardLayout layout, std::int64_t vocab_size);
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;
  ~MappedShard();

  const std::string& path() const { return path_; }
  std::int64_t tokens() const { return layout_.tokens; }
  bool in_memory() const { return !decoded_.empty(); }
  void read(std::int64_t first, std::int64_t count, std::int32_t* out) const;

 private:
  void map_file();
  void check_ids(const std::int32_t* ids, std::int64_t count, std::int64_t first) const;

  std::string path_;
  ShardLayout layout_;
  std::int64_t vocab_size_;
  const unsigned char* map_ = nullptr;
  std::uint64_t map_bytes_ = 0;
  std::vector<unsigned char> decoded_;  // compressed shards: all tokens, decoded
  const unsigned char* base_ = nullptr;  // extents' offsets count from here
};

// A split's shards read as one stream, in manifest order.
class ShardedTokens final : public TokenSource {
 public:
  explicit ShardedTokens(std::vector<std::shared_ptr<const MappedShard>> shards);
  std::int64_t size() const override { return starts_.back(); }
  void read(std::int64_t first, std::int64_t count, std::int32_t* out) const override;
  const std::vector<std::shared_ptr<const MappedShard>>& shards() const { return shards_; }
  // The shard holding stream position `position`, and the position within it.
  std::pair<std::size_t, std::int64_t> locate(std::int64_t position) const;

 private:
  std::vector<std::shared_ptr<const MappedShard>> shards_;
  std::vector<std::int64_t> starts_;  // stream position of each shard's first token, then the total
};

}  // namespace ustrain
