// A stream of token ids readable at any position: a split's shards, memory-mapped
// (data/shards/mapped_shard.h), or a vector in memory. Reading needs no HDF5 and changes nothing,
// so any number of threads may read at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ustrain {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::int64_t size() const = 0;
  // Copies tokens [first, first + count) into out as int32. UserError naming the shard and the
  // position if an id lies outside the vocabulary.
  virtual void read(std::int64_t first, std::int64_t count, std::int32_t* out) const = 0;
};

// Tokens held in memory (tests, small streams); ids are not checked.
class MemoryTokens final : public TokenSource {
 public:
  explicit MemoryTokens(std::shared_ptr<const std::vector<std::int32_t>> tokens);
  std::int64_t size() const override { return static_cast<std::int64_t>(tokens_->size()); }
  void read(std::int64_t first, std::int64_t count, std::int32_t* out) const override;

 private:
  std::shared_ptr<const std::vector<std::int32_t>> tokens_;
};

}  // namespace ustrain
