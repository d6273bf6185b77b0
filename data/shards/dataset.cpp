#include "data/shards/dataset.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "data/files/crc32.h"
#include "data/shards/manifest.h"
#include "data/shards/mapped_shard.h"
#include "data/files/path_status.h"
#include "data/shards/shard_file.h"
#include "data/shards/shard_layout.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

constexpr const char* kRedo = "re-copy the dataset or convert it again";

void check_file_present(const std::string& path, std::uint64_t bytes, const char* what) {
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (error)
    throw UserError(fmt::format("{} {} listed in {} is missing or unreadable ({}): {}", what, path,
                                kManifestFileName, error.message(), kRedo));
  if (size != bytes)
    throw UserError(fmt::format("{} {} is {} bytes but {} says {}: the file is truncated or was changed; {}",
                                what, path, size, kManifestFileName, bytes, kRedo));
  // Its size needs no permission to read it: opened here, a file this user may not read is
  // named as such now (and by --dry-run), not later as a damaged shard.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int cause = errno;
    throw UserError(fmt::format("{} {} listed in {} cannot be opened for reading ({}): {}", what, path,
                                kManifestFileName, std::strerror(cause),
                                cause == EACCES || cause == EPERM
                                    ? "give this user read permission on it (chmod a+r, or run as its owner)"
                                    : kRedo));
  }
  ::close(fd);
}

void check_checksum(const std::string& path, const std::string& expected, const char* what) {
  const std::string checksum = crc32_label(crc32_of_file(path));
  if (checksum != expected)
    throw UserError(fmt::format("{} {} fails its checksum ({} says {}, the file has {}): the file is "
                                "damaged; {}",
                                what, path, kManifestFileName, expected, checksum, kRedo));
}

}  // namespace

const char* split_name(Split split) { return split == Split::train ? "train" : "val"; }

TokenDataset TokenDataset::open(const std::string& dir) {
  std::error_code error;
  if (const PathStatus status = path_status(dir); status.access == PathAccess::missing)
    throw UserError(fmt::format("dataset directory {} does not exist: check the data path, or "
                                "convert text into it first with `ustrain data convert`",
                                dir));
  else if (status.access == PathAccess::unreachable)
    throw UserError(fmt::format("dataset directory {} {}: check the permissions of it and of the directories "
                                "above it",
                                dir, describe_unusable(status)));
  if (!fs::is_directory(dir, error))
    throw UserError(fmt::format("dataset path {} is not a directory: point it at the directory "
                                "that holds {}",
                                dir, kManifestFileName));

  const std::string manifest_path = (fs::path(dir) / kManifestFileName).string();
  Manifest manifest = read_manifest(manifest_path);
  TokenDataset dataset;
  dataset.dir_ = dir;
  dataset.tokenizer_ = manifest.tokenizer;
  dataset.format_minor_ = manifest.format_minor;
  dataset.source_ = manifest.source;
  dataset.compression_ = manifest.compression.empty() ? "none" : manifest.compression;
  dataset.train_ = std::move(manifest.train);
  dataset.val_ = std::move(manifest.val);

  for (const ShardInfo& shard : dataset.train_) check_file_present(dataset.shard_path(shard), shard.bytes, "shard");
  for (const ShardInfo& shard : dataset.val_) check_file_present(dataset.shard_path(shard), shard.bytes, "shard");
  if (!dataset.tokenizer_.model_file.empty()) {
    const std::string model = (fs::path(dir) / dataset.tokenizer_.model_file).string();
    if (!fs::is_regular_file(model, error))
      throw UserError(fmt::format("tokenizer model {} listed in {} is missing: {}", model, kManifestFileName, kRedo));
  }
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

std::int64_t TokenDataset::documents(Split split) const {
  std::int64_t total = 0;
  for (const ShardInfo& shard : shards(split)) total += shard.documents;
  return total;
}

const std::vector<ShardInfo>& TokenDataset::shards(Split split) const {
  return split == Split::train ? train_ : val_;
}

std::string TokenDataset::shard_path(const ShardInfo& shard) const { return (fs::path(dir_) / shard.file).string(); }

void TokenDataset::verify_checksums(Split split, int threads) const {
  if (!tokenizer_.model_file.empty())
    check_checksum((fs::path(dir_) / tokenizer_.model_file).string(), tokenizer_.model_checksum, "tokenizer model");
  const std::vector<ShardInfo>& list = shards(split);
  std::vector<std::exception_ptr> errors(list.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < list.size(); i = next++) {
      try {
        check_checksum(shard_path(list[i]), list[i].checksum, "shard");
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  const std::size_t extra = std::min<std::size_t>(std::max(threads, 1) - 1, list.size());
  for (std::size_t t = 0; t < extra; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
  // The first bad shard in manifest order, so the message does not depend on timing.
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

// The shard's own attributes must agree with the manifest before its tokens are trusted.
void TokenDataset::check_shard_header(const ShardInfo& shard) const {
  const std::string path = shard_path(shard);
  const ShardHeader header = read_shard_header(path);
  if (header.format_version > kShardFormatVersion)
    throw UserError(fmt::format("shard {} has format_version {}, but this ustrain reads only up to "
                                "version {}: upgrade ustrain to read this dataset",
                                path, header.format_version, kShardFormatVersion));
  const TokenizerIdentity& t = header.tokenizer;
  if (t.name != tokenizer_.name || t.kind != tokenizer_.kind || t.vocab_size != tokenizer_.vocab_size ||
      t.model_checksum != tokenizer_.model_checksum)
    throw UserError(fmt::format("shard {} was written for tokenizer {}, but {} says {}: the shard belongs to "
                                "another dataset; {}",
                                path, t.describe(), kManifestFileName, tokenizer_.describe(), kRedo));
  if (header.token_count != shard.tokens)
    throw UserError(fmt::format("shard {} holds {} tokens, but {} says {}: {}", path, header.token_count,
                                kManifestFileName, shard.tokens, kRedo));
}

std::shared_ptr<const ShardedTokens> TokenDataset::open_tokens(Split split) const {
  std::vector<std::shared_ptr<const MappedShard>> mapped;
  for (const ShardInfo& shard : shards(split)) {
    check_shard_header(shard);
    const std::string path = shard_path(shard);
    ShardLayout layout = read_shard_layout(path);
    if (layout.tokens != shard.tokens)
      throw UserError(fmt::format("shard {} holds {} tokens in /tokens, but {} says {}: {}", path,
                                  layout.tokens, kManifestFileName, shard.tokens, kRedo));
    mapped.push_back(std::make_shared<const MappedShard>(path, std::move(layout), vocab_size()));
  }
  return std::make_shared<const ShardedTokens>(std::move(mapped));
}

std::vector<std::int32_t> TokenDataset::read_shard(const ShardInfo& shard) const {
  const std::string path = shard_path(shard);
  check_checksum(path, shard.checksum, "shard");
  check_shard_header(shard);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(shard.tokens));
  read_shard_tokens(path, tokens.data(), shard.tokens);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size())
      throw UserError(fmt::format("shard {} holds token id {} at position {}, outside the "
                                  "vocabulary of size {} of tokenizer '{}': {}",
                                  path, tokens[i], i, vocab_size(), tokenizer_.name, kRedo));
  }
  return tokens;
}

std::vector<std::int32_t> TokenDataset::read_all(Split split) const {
  std::vector<std::int32_t> tokens;
  tokens.reserve(static_cast<std::size_t>(this->tokens(split)));
  for (const ShardInfo& shard : shards(split)) {
    const std::vector<std::int32_t> part = read_shard(shard);
    tokens.insert(tokens.end(), part.begin(), part.end());
  }
  return tokens;
}

}  // namespace ustrain
