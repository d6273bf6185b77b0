#include "data/shards/shard_writer.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "data/files/crc32.h"
#include "data/files/durable_output.h"
#include "kernels/error.h"

namespace ustrain {

ShardWriter::ShardWriter(std::string dir, Split split, ShardHeader header, std::int64_t shard_tokens,
                         ShardWriteOptions options)
    : dir_(std::move(dir)), split_(split), header_(std::move(header)),
      shard_tokens_(static_cast<std::size_t>(shard_tokens)), options_(options) {
  USTRAIN_ASSERT(shard_tokens > 0, "shard_tokens must be positive");
  // Room for a whole shard up front saves the copies of a growing buffer; untouched pages of
  // the reservation cost no memory, and the cap keeps huge shard sizes from failing here.
  buffer_.reserve(std::min<std::size_t>(shard_tokens_, std::size_t{1} << 26));
}

void ShardWriter::add_document(std::span<const std::int32_t> tokens) {
  if (buffer_.size() == shard_tokens_) write_buffered_shard();
  doc_offsets_.push_back(buffer_.size());
  ++documents_;
  extend_document(tokens);
}

void ShardWriter::extend_document(std::span<const std::int32_t> tokens) {
  tokens_ += static_cast<std::int64_t>(tokens.size());
  while (!tokens.empty()) {
    if (buffer_.size() == shard_tokens_) write_buffered_shard();
    const std::size_t take = std::min(tokens.size(), shard_tokens_ - buffer_.size());
    buffer_.insert(buffer_.end(), tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(take));
    tokens = tokens.subspan(take);
  }
}

std::vector<ShardInfo> ShardWriter::finish() {
  if (!buffer_.empty()) write_buffered_shard();
  return std::move(shards_);
}

void ShardWriter::write_buffered_shard() {
  ShardInfo shard;
  shard.file = fmt::format("{}-{:05d}.h5", split_name(split_), shards_.size());
  shard.tokens = static_cast<std::int64_t>(buffer_.size());
  shard.documents = static_cast<std::int64_t>(doc_offsets_.size());
  const std::string path = (std::filesystem::path(dir_) / shard.file).string();

  doc_offsets_.push_back(buffer_.size());
  write_shard(path, header_, buffer_, doc_offsets_, options_);
  fsync_path(path);
  shard.bytes = std::filesystem::file_size(path);
  shard.checksum = crc32_label(crc32_of_file(path));

  shards_.push_back(std::move(shard));
  buffer_.clear();
  doc_offsets_.clear();
}

}  // namespace ustrain
