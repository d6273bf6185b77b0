// Byte-pair encoding as tokenizer.json's "BPE" model runs it: a word starts as its characters
// (or, byte-level, its bytes), and the adjacent pair with the lowest merge rank is merged
// until no listed merge applies (the leftmost of equal pairs first). Characters missing from
// the vocabulary become byte tokens <0xXX> (byte_fallback) or the unknown token. Results of
// words seen before come from a cache shared by the threads that encode.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ustrain {

struct TransparentStringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, std::int32_t, TransparentStringHash, std::equal_to<>>;

struct BpeOptions {
  bool byte_level = false;     // vocabulary and words are raw bytes (ByteLevel pre-tokenizer)
  bool byte_fallback = false;  // unknown characters as <0xXX> tokens
  bool ignore_merges = false;  // a word that is a token as a whole is that token
  bool fuse_unk = false;       // consecutive unknown characters make one unknown token
  std::int32_t unk_id = -1;    // -1: none (an unknown character is then an error)
};

class BpeModel {
 public:
  // `vocab` maps tokens (raw bytes when byte_level) to ids; `merges` lists the pairs in rank
  // order. UserError naming `where` for a merge whose parts or result are not tokens.
  BpeModel(TokenIdMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           const std::string& where);

  // Appends the ids of `word`. Thread-safe.
  void encode(std::string_view word, std::vector<std::int32_t>& out) const;

 private:
  struct Merge {
    std::int32_t rank, result;
  };
  // Merges by pair: open addressing in one flat array, which the merge loop probes for
  // every adjacent pair (a node-based map costs a cache miss per probe).
  class MergeTable {
   public:
    void reserve(std::size_t count);
    void insert_or_assign(std::uint64_t key, Merge merge);
    const Merge* find(std::uint64_t key) const;

   private:
    struct Slot {
      std::uint64_t key = kEmpty;
      Merge merge{};
    };
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
    std::size_t slot_of(std::uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    std::vector<Slot> slots_;
    int shift_ = 64;
  };
  void encode_part(std::string_view part, std::vector<std::int32_t>& out) const;
  std::vector<std::int32_t> character_ids(std::string_view word) const;
  void merge_word(std::string_view word, std::vector<std::int32_t>& out) const;
  bool cached(std::string_view word, std::size_t hash, std::vector<std::int32_t>& out) const;
  void remember(std::string_view word, std::size_t hash, const std::int32_t* ids, std::size_t count) const;

  TokenIdMap vocab_;
  MergeTable merges_;  // (left id << 32 | right id) -> merge
  BpeOptions options_;
  std::array<std::int32_t, 256> byte_ids_;           // byte-level: each byte's token; else <0xXX>
  std::string where_;
  // No token has U+2581 (sentencepiece's space) after another character than U+2581, so no
  // merge crosses the place before a U+2581 that follows such a character: a long word (a
  // whole document, when nothing splits it before BPE) is merged part by part with the same
  // result, and the parts are cached.
  bool parts_at_spaces_ = false;

  static constexpr std::size_t kCacheShards = 64, kCacheWordsPerShard = 8192, kCachedWordBytes = 128;
  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::int32_t>, TransparentStringHash, std::equal_to<>> words;
  };
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace ustrain
