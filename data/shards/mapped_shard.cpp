#include "data/shards/mapped_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

template <class Stored>
void widen(const unsigned char* bytes, std::int64_t count, std::int32_t* out) {
  for (std::int64_t i = 0; i < count; ++i) {
    Stored value;
    std::memcpy(&value, bytes + i * static_cast<std::int64_t>(sizeof(Stored)), sizeof(Stored));
    if constexpr (std::endian::native == std::endian::big) {
      if constexpr (sizeof(Stored) == 2) value = __builtin_bswap16(value);
      else value = __builtin_bswap32(value);
    }
    // uint32 ids above INT32_MAX turn negative here, and then fail the vocabulary check.
    out[i] = static_cast<std::int32_t>(value);
  }
}

}  // namespace

MappedShard::MappedShard(std::string path, ShardLayout layout, std::int64_t vocab_size)
    : path_(std::move(path)), layout_(std::move(layout)), vocab_size_(vocab_size) {
  if (layout_.filtered) {
    decoded_ = read_shard_token_bytes(path_, layout_);
    base_ = decoded_.data();
    layout_.extents = {{0, layout_.tokens, 0}};
    layout_.extent_tokens = layout_.tokens;
    return;
  }
  map_file();
  base_ = map_;
  const auto width = static_cast<std::uint64_t>(layout_.token_bytes);
  for (const TokenExtent& extent : layout_.extents)
    if (extent.file_offset > map_bytes_ || static_cast<std::uint64_t>(extent.tokens) * width > map_bytes_ - extent.file_offset)
      throw UserError(fmt::format("shard {}: tokens {}.. lie beyond the end of the file; the file is damaged: "
                                  "re-copy the dataset or convert it again",
                                  path_, extent.first_token));
}

MappedShard::~MappedShard() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void MappedShard::map_file() {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(fmt::format("cannot open shard {}: {}", path_, std::strerror(errno)));
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    const int error = errno;
    ::close(fd);
    throw UserError(fmt::format("cannot read shard {}: {}", path_, std::strerror(error)));
  }
  map_bytes_ = static_cast<std::uint64_t>(status.st_size);
  void* map = map_bytes_ > 0 ? ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
  const int error = errno;
  ::close(fd);
  if (map == MAP_FAILED) throw UserError(fmt::format("cannot map shard {}: {}", path_, std::strerror(error)));
  map_ = static_cast<const unsigned char*>(map);
}

void MappedShard::check_ids(const std::int32_t* ids, std::int64_t count, std::int64_t first) const {
  // One pass the compiler vectorises; the search runs only for a bad id.
  bool bad = false;
  for (std::int64_t i = 0; i < count; ++i) bad |= ids[i] < 0 || ids[i] >= vocab_size_;
  if (!bad) return;
  const std::int32_t* at = std::find_if(ids, ids + count, [&](std::int32_t id) { return id < 0 || id >= vocab_size_; });
  const std::int64_t id = *at < 0 ? static_cast<std::int64_t>(static_cast<std::uint32_t>(*at)) : *at;
  throw UserError(fmt::format("shard {} holds token id {} at position {}, outside the vocabulary of size {}: "
                              "the data was converted with a different tokenizer or is damaged; convert "
                              "it again with the right tokenizer",
                              path_, id, first + (at - ids), vocab_size_));
}

void MappedShard::read(std::int64_t first, std::int64_t count, std::int32_t* out) const {
  USTRAIN_ASSERT(first >= 0 && count >= 0 && first + count <= layout_.tokens, "read outside the shard");
  const std::int64_t start = first, total = count;
  std::int32_t* const begin = out;
  while (count > 0) {
    const TokenExtent& extent = layout_.extents[static_cast<std::size_t>(first / layout_.extent_tokens)];
    const std::int64_t within = first - extent.first_token;
    const std::int64_t take = std::min(count, extent.tokens - within);
    const unsigned char* bytes = base_ + extent.file_offset + within * layout_.token_bytes;
    if (layout_.token_bytes == 2) widen<std::uint16_t>(bytes, take, out);
    else widen<std::uint32_t>(bytes, take, out);
    first += take;
    out += take;
    count -= take;
  }
  check_ids(begin, total, start);
}

ShardedTokens::ShardedTokens(std::vector<std::shared_ptr<const MappedShard>> shards) : shards_(std::move(shards)) {
  starts_.push_back(0);
  for (const auto& shard : shards_) starts_.push_back(starts_.back() + shard->tokens());
}

std::pair<std::size_t, std::int64_t> ShardedTokens::locate(std::int64_t position) const {
  const auto next = std::upper_bound(starts_.begin(), starts_.end() - 1, position);
  const auto shard = static_cast<std::size_t>(next - starts_.begin() - 1);
  return {shard, position - starts_[shard]};
}

void ShardedTokens::read(std::int64_t first, std::int64_t count, std::int32_t* out) const {
  USTRAIN_ASSERT(first >= 0 && count >= 0 && first + count <= size(), "read outside the token stream");
  while (count > 0) {
    const auto [shard, within] = locate(first);
    const std::int64_t take = std::min(count, shards_[shard]->tokens() - within);
    shards_[shard]->read(within, take, out);
    first += take;
    out += take;
    count -= take;
  }
}

}  // namespace ustrain
