#include "data/tokenizers/bpe_model.h"

#include <queue>

#include <fmt/format.h>

#include "data/tokenizers/utf8.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

}  // namespace

void BpeModel::MergeTable::reserve(std::size_t count) {
  int bits = 4;
  while ((std::size_t{1} << bits) < 2 * count) ++bits;  // at most half full
  slots_.assign(std::size_t{1} << bits, Slot{});
  shift_ = 64 - bits;
}

void BpeModel::MergeTable::insert_or_assign(std::uint64_t key, Merge merge) {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = slot_of(key);; i = (i + 1) & mask) {
    if (slots_[i].key == kEmpty || slots_[i].key == key) {
      slots_[i] = {key, merge};
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::MergeTable::find(std::uint64_t key) const {
  if (slots_.empty()) return nullptr;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = slot_of(key);; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i].merge;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel(TokenIdMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options, const std::string& where)
    : vocab_(std::move(vocab)), options_(options), where_(where) {
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || m == vocab_.end())
      throw UserError(fmt::format("{}: merge {} ('{}' + '{}') names a token missing from the vocabulary; the file is "
                                  "damaged",
                                  where, rank, abbreviate(left), abbreviate(right)));
    // A pair listed twice keeps its last rank, as in the tokenizers library (a map built in order).
    merges_.insert_or_assign(pair_key(l->second, r->second), Merge{static_cast<std::int32_t>(rank), m->second});
  }
  constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  parts_at_spaces_ = !options_.byte_level;
  for (const auto& [token, id] : vocab_)
    for (std::size_t at = token.find(kSpace, 1); parts_at_spaces_ && at != std::string::npos; at = token.find(kSpace, at + 1))
      if (!token.substr(0, at).ends_with(kSpace)) parts_at_spaces_ = false;
  for (int b = 0; b < 256; ++b) {
    const std::string key = options_.byte_level ? std::string(1, static_cast<char>(b)) : fmt::format("<0x{:02X}>", b);
    const auto found = vocab_.find(key);
    byte_ids_[static_cast<std::size_t>(b)] = found == vocab_.end() ? -1 : found->second;
  }
}

void BpeModel::encode(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const auto whole = vocab_.find(word);
    if (whole != vocab_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  if (!parts_at_spaces_ || word.size() <= kCachedWordBytes) return encode_part(word, out);
  constexpr std::string_view kSpace = "\xE2\x96\x81";
  std::size_t from = 0;
  for (std::size_t at = word.find(kSpace, 1); at != std::string_view::npos; at = word.find(kSpace, at + kSpace.size())) {
    if (word.substr(0, at).ends_with(kSpace)) continue;  // inside a run of U+2581
    encode_part(word.substr(from, at - from), out);
    from = at;
  }
  encode_part(word.substr(from), out);
}

void BpeModel::encode_part(std::string_view part, std::vector<std::int32_t>& out) const {
  if (part.size() > kCachedWordBytes) return merge_word(part, out);
  const std::size_t hash = TransparentStringHash{}(part);
  if (cached(part, hash, out)) return;
  const std::size_t first = out.size();
  merge_word(part, out);
  remember(part, hash, out.data() + first, out.size() - first);
}

bool BpeModel::cached(std::string_view word, std::size_t hash, std::vector<std::int32_t>& out) const {
  CacheShard& shard = cache_[hash % kCacheShards];
  std::lock_guard lock(shard.mutex);
  const auto found = shard.words.find(word);
  if (found == shard.words.end()) return false;
  out.insert(out.end(), found->second.begin(), found->second.end());
  return true;
}

void BpeModel::remember(std::string_view word, std::size_t hash, const std::int32_t* ids, std::size_t count) const {
  CacheShard& shard = cache_[hash % kCacheShards];
  std::lock_guard lock(shard.mutex);
  if (shard.words.size() < kCacheWordsPerShard) shard.words.try_emplace(std::string(word), ids, ids + count);
}

// The word's characters as token ids before any merge: each character's token, else its
// bytes' tokens (byte_fallback), else the unknown token (runs fused with fuse_unk).
std::vector<std::int32_t> BpeModel::character_ids(std::string_view word) const {
  std::vector<std::int32_t> ids;
  ids.reserve(word.size());
  bool last_unknown = false;
  const auto unknown = [&](std::string_view character) {
    if (options_.unk_id < 0)
      throw UserError(fmt::format("{}: the character '{}' has no token, and the tokenizer has neither byte_fallback "
                                  "nor an unk_token to stand for it",
                                  where_, character));
    if (!(options_.fuse_unk && last_unknown)) ids.push_back(options_.unk_id);
    last_unknown = true;
  };
  for (std::size_t at = 0; at < word.size();) {
    if (options_.byte_level) {
      const std::int32_t id = byte_ids_[static_cast<unsigned char>(word[at])];
      if (id >= 0) {
        ids.push_back(id);
        last_unknown = false;
      } else {
        unknown(word.substr(at, 1));
      }
      ++at;
      continue;
    }
    const std::size_t length = std::max<std::size_t>(1, valid_sequence_length(word, at));
    const std::string_view character = word.substr(at, length);
    at += length;
    const auto found = vocab_.find(character);
    if (found != vocab_.end()) {
      ids.push_back(found->second);
      last_unknown = false;
      continue;
    }
    bool all_bytes = options_.byte_fallback;
    for (char b : character) all_bytes = all_bytes && byte_ids_[static_cast<unsigned char>(b)] >= 0;
    if (all_bytes) {
      for (char b : character) ids.push_back(byte_ids_[static_cast<unsigned char>(b)]);
      last_unknown = false;
    } else {
      unknown(character);
    }
  }
  return ids;
}

void BpeModel::merge_word(std::string_view word, std::vector<std::int32_t>& out) const {
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;  // neighbours in the word; -1 at either end
    bool gone;                // merged into its left neighbour
  };
  const std::vector<std::int32_t> ids = character_ids(word);
  std::vector<Symbol> symbols;
  symbols.reserve(ids.size());
  for (std::int32_t id : ids) {
    const auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, false});
  }
  symbols.back().next = -1;

  struct Candidate {
    std::int32_t rank, pos, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](std::int32_t left) {
    if (left < 0 || symbols[static_cast<std::size_t>(left)].next < 0) return;
    const Symbol& l = symbols[static_cast<std::size_t>(left)];
    const Merge* found = merges_.find(pair_key(l.id, symbols[static_cast<std::size_t>(l.next)].id));
    if (found != nullptr) queue.push({found->rank, left, found->result});
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (left.gone || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    // The pair may have changed since it was queued: merge only what is still there.
    const Merge* now = merges_.find(pair_key(left.id, right.id));
    if (now == nullptr || now->result != top.result) continue;  // as the library checks it
    left.id = top.result;
    right.gone = true;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = top.pos;
    consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols)
    if (!s.gone) out.push_back(s.id);
}

}  // namespace ustrain
