#include "data/dataset.h"

#include <filesystem>

#include <fmt/format.h>

#include "data/crc32.h"
#include "data/manifest.h"
#include "data/shard_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

constexpr const char* kRedo = "re-copy the dataset or convert it again";

std::string shard_path(const std::string& dir, const ShardInfo& shard) {
  return (fs::path(dir) / shard.file).string();
}

void check_shard_present(const std::string& dir, const ShardInfo& shard) {
  const std::string path = shard_path(dir, shard);
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (error)
    throw UserError(fmt::format("shard {} listed in {} is missing or unreadable ({}): {}", path,
                                kManifestFileName, error.message(), kRedo));
  if (size != shard.bytes)
    throw UserError(fmt::format("shard {} is {} bytes but {} says {}: the file is truncated or "
                                "was changed; {}",
                                path, size, kManifestFileName, shard.bytes, kRedo));
}

// The shard's own attributes must agree with the manifest before its tokens are trusted.
void check_shard_header(const std::string& path, const ShardInfo& shard, const TokenDataset& dataset) {
  const ShardHeader header = read_shard_header(path);
  if (header.format_version > kShardFormatVersion)
    throw UserError(fmt::format("shard {} has format_version {}, but this ustrain reads only up to "
                                "version {}: upgrade ustrain to read this dataset",
                                path, header.format_version, kShardFormatVersion));
  if (header.tokenizer != dataset.tokenizer() || header.vocab_size != dataset.vocab_size())
    throw UserError(fmt::format("shard {} was written for tokenizer '{}' (vocab {}), but {} says "
                                "'{}' (vocab {}): {}",
                                path, header.tokenizer, header.vocab_size, kManifestFileName,
                                dataset.tokenizer(), dataset.vocab_size(), kRedo));
  if (header.token_count != shard.tokens)
    throw UserError(fmt::format("shard {} holds {} tokens, but {} says {}: {}", path,
                                header.token_count, kManifestFileName, shard.tokens, kRedo));
}

}  // namespace

const char* split_name(Split split) { return split == Split::train ? "train" : "val"; }

TokenDataset TokenDataset::open(const std::string& dir) {
  std::error_code error;
  if (!fs::exists(dir, error))
    throw UserError(fmt::format("dataset directory {} does not exist: check the data path, or "
                                "convert text into it first with `ustrain data convert`",
                                dir));
  if (!fs::is_directory(dir, error))
    throw UserError(fmt::format("dataset path {} is not a directory: point it at the directory "
                                "that holds {}",
                                dir, kManifestFileName));

  const std::string manifest_path = (fs::path(dir) / kManifestFileName).string();
  Manifest manifest = read_manifest(manifest_path);
  TokenDataset dataset;
  dataset.dir_ = dir;
  dataset.tokenizer_ = manifest.tokenizer;
  dataset.vocab_size_ = manifest.vocab_size;
  dataset.eos_id_ = manifest.eos_id;
  dataset.train_ = std::move(manifest.train);
  dataset.val_ = std::move(manifest.val);

  for (const ShardInfo& shard : dataset.train_) check_shard_present(dir, shard);
  for (const ShardInfo& shard : dataset.val_) check_shard_present(dir, shard);
  if (dataset.tokens(Split::train) == 0)
    throw UserError(fmt::format("{}: the train split has no tokens; convert more text, or hold "
                                "out a smaller validation fraction",
                                manifest_path));
  return dataset;
}

std::int64_t TokenDataset::tokens(Split split) const {
  std::int64_t total = 0;
  for (const ShardInfo& shard : shards(split)) total += shard.tokens;
  return total;
}

const std::vector<ShardInfo>& TokenDataset::shards(Split split) const {
  return split == Split::train ? train_ : val_;
}

std::vector<std::int32_t> TokenDataset::read_all(Split split) const {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(this->tokens(split)));
  std::size_t offset = 0;
  for (const ShardInfo& shard : shards(split)) {
    const std::string path = shard_path(dir_, shard);
    const std::string checksum = crc32_label(crc32_of_file(path));
    if (checksum != shard.checksum)
      throw UserError(fmt::format("shard {} fails its checksum ({} says {}, the file has {}): the "
                                  "file is damaged; {}",
                                  path, kManifestFileName, shard.checksum, checksum, kRedo));
    check_shard_header(path, shard, *this);
    std::int32_t* out = tokens.data() + offset;
    read_shard_tokens(path, out, shard.tokens);
    for (std::int64_t i = 0; i < shard.tokens; ++i) {
      if (out[i] < 0 || out[i] >= vocab_size_)
        throw UserError(fmt::format("shard {} holds token id {} at position {}, outside the "
                                    "vocabulary of size {} of tokenizer '{}': {}",
                                    path, out[i], i, vocab_size_, tokenizer_, kRedo));
    }
    offset += static_cast<std::size_t>(shard.tokens);
  }
  return tokens;
}

}  // namespace ustrain
