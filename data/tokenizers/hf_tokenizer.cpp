#include "data/tokenizers/hf_tokenizer.h"

#include <deque>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/hf_tokenizer_json.h"
#include "data/files/json_input.h"
#include "data/files/regular_file.h"
#include "data/tokenizers/utf8.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;
namespace {

// tokenizer_config.json's eos_token: a string, or an AddedToken object with its content. A file
// that does not parse is passed over (the EOS then comes from the added tokens); one nested too
// deeply is refused.
std::string configured_eos(const std::string& config_path) {
  std::error_code absent;
  if (!fs::exists(config_path, absent)) return "";
  nlohmann::json config;
  try {
    config = parse_json(read_regular_file(config_path), config_path);
  } catch (const nlohmann::json::exception&) {
    return "";
  }
  if (!config.is_object() || !config.contains("eos_token")) return "";
  const auto& eos = config["eos_token"];
  if (eos.is_string()) return eos.get<std::string>();
  if (eos.is_object() && eos.contains("content") && eos["content"].is_string()) return eos["content"].get<std::string>();
  return "";
}

}  // namespace

HfTokenizer::HfTokenizer(std::string json, const std::string& label, const std::string& eos_token)
    : json_(std::move(json)) {
  HfTokenizerParts parts = parse_hf_tokenizer_json(json_, label);
  added_ = parts.added_tokens;
  normalizer_ = TextNormalizer(std::move(parts.normalizer));
  // Tokens marked "normalized" are looked for in normalized text, written as the normalizer
  // writes them (as the library does); the others in the text as it came.
  std::vector<AddedToken> raw, normalized;
  for (AddedToken t : parts.added_tokens) {
    if (t.normalized && !normalizer_.empty()) {
      t.content = normalizer_.normalize(t.content);
      normalized.push_back(std::move(t));
    } else {
      raw.push_back(std::move(t));
    }
  }
  raw_tokens_ = AddedTokenMatcher(std::move(raw));
  normalized_tokens_ = AddedTokenMatcher(std::move(normalized));
  pre_tokenizer_ = PreTokenizer(std::move(parts.pre_tokenizer));
  decoder_ = TokenDecoder(std::move(parts.decoder));

  std::int32_t size = 0;
  for (const auto& [token, id] : parts.vocab) size = std::max(size, id + 1);
  for (const AddedToken& t : added_) size = std::max(size, t.id + 1);
  tokens_.assign(static_cast<std::size_t>(size), "");
  special_.assign(static_cast<std::size_t>(size), false);
  for (const auto& [token, id] : parts.vocab) tokens_[static_cast<std::size_t>(id)] = token;
  for (const AddedToken& t : added_) {
    tokens_[static_cast<std::size_t>(t.id)] = t.content;
    special_[static_cast<std::size_t>(t.id)] = t.special;
  }

  BpeOptions options = parts.bpe;
  options.byte_level = parts.byte_level;
  if (!parts.unk_token.empty()) {
    const auto unk = parts.vocab.find(parts.unk_token);
    if (unk == parts.vocab.end())
      throw UserError(fmt::format("{}: the unk_token '{}' is not in the vocabulary; the file is damaged", label,
                                  abbreviate(parts.unk_token)));
    options.unk_id = unk->second;
  }
  TokenIdMap vocab = std::move(parts.vocab);
  auto merges = std::move(parts.merges);
  if (parts.byte_level) {  // the model sees raw bytes: its tokens and merges are turned back into bytes
    const ByteLevelAlphabet alphabet;
    TokenIdMap bytes;
    bytes.reserve(vocab.size());
    for (const auto& [token, id] : vocab)
      if (auto b = alphabet.bytes_of(token)) bytes.emplace(std::move(*b), id);
    for (auto& [left, right] : merges) {
      auto l = alphabet.bytes_of(left), r = alphabet.bytes_of(right);
      if (!l || !r)
        throw UserError(fmt::format("{}: the merge '{} {}' is not written in byte-level characters although the "
                                    "pre-tokenizer is ByteLevel; the file is damaged",
                                    label, abbreviate(left), abbreviate(right)));
      left = std::move(*l);
      right = std::move(*r);
    }
    vocab = std::move(bytes);
  }
  model_ = std::make_unique<BpeModel>(std::move(vocab), merges, options, label);

  if (!eos_token.empty()) {
    eos_id_ = token_id(eos_token);
    if (eos_id_ < 0)
      throw UserError(fmt::format("{}: the EOS token '{}' (tokenizer_config.json's eos_token) is not one of its tokens",
                                  label, abbreviate(eos_token)));
  } else {
    for (const char* name : {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"})
      for (const AddedToken& t : added_)
        if (eos_id_ < 0 && t.special && t.content == name) eos_id_ = t.id;
  }
}

std::unique_ptr<HfTokenizer> HfTokenizer::from_file(const std::string& path) {
  std::error_code absent;
  if (!fs::exists(path, absent)) throw UserError(fmt::format("tokenizer file {} not found: check the path", path));
  const std::string config = (fs::path(path).parent_path() / "tokenizer_config.json").string();
  return std::make_unique<HfTokenizer>(read_regular_file(path), path, configured_eos(config));
}

std::unique_ptr<HfTokenizer> HfTokenizer::with_eos_id(std::string json, const std::string& label, std::int32_t eos_id) {
  auto t = std::make_unique<HfTokenizer>(std::move(json), label);
  if (eos_id >= t->vocab_size())
    throw UserError(fmt::format("{}: the recorded EOS id {} is outside its vocabulary of {}", label, eos_id, t->vocab_size()));
  t->eos_id_ = eos_id;
  return t;
}

std::int32_t HfTokenizer::token_id(const std::string& content) const {
  for (const AddedToken& t : added_)
    if (t.content == content) return t.id;
  for (std::size_t id = 0; id < tokens_.size(); ++id)
    if (tokens_[id] == content) return static_cast<std::int32_t>(id);
  return -1;
}

const std::string& HfTokenizer::token(std::int32_t id) const {
  static const std::string none;
  return id >= 0 && id < vocab_size() ? tokens_[static_cast<std::size_t>(id)] : none;
}

void HfTokenizer::encode_text(std::string_view text, bool at_start, std::vector<std::int32_t>& out,
                              RegexBudget& budget) const {
  std::deque<std::string> arena;
  std::string_view normalized = text;
  if (!normalizer_.empty()) normalized = arena.emplace_back(normalizer_.normalize(text));
  std::vector<TextSegment> segments;
  if (normalized_tokens_.empty())
    segments.push_back({normalized, -1, 0});
  else
    normalized_tokens_.split(normalized, segments);
  std::vector<Piece> pieces;
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
      continue;
    }
    pieces.assign(1, Piece{segment.text, at_start && segment.offset == 0});
    pre_tokenizer_.run(pieces, arena, budget);
    for (const Piece& piece : pieces) model_->encode(piece.text, out);
  }
}

std::vector<std::int32_t> HfTokenizer::encode(std::string_view text) const {
  std::string repaired;
  if (!is_valid_utf8(text)) text = repaired = repair_utf8(text);
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3);
  RegexBudget budget(text.size());  // one for the whole document, whatever its segments and pieces
  if (raw_tokens_.empty()) {
    encode_text(text, true, ids, budget);
    return ids;
  }
  std::vector<TextSegment> segments;
  raw_tokens_.split(text, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0)
      ids.push_back(segment.id);
    else
      encode_text(segment.text, segment.offset == 0, ids, budget);
  }
  return ids;
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || special_[static_cast<std::size_t>(id)] || tokens_[static_cast<std::size_t>(id)].empty())
      continue;
    tokens.push_back(tokens_[static_cast<std::size_t>(id)]);
  }
  return decoder_.decode(std::move(tokens));
}

std::string HfTokenizer::piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size() || tokens_[static_cast<std::size_t>(id)].empty()) return fmt::format("<id {}>", id);
  if (id == eos_id_) return "<eos>";
  if (special_[static_cast<std::size_t>(id)]) return tokens_[static_cast<std::size_t>(id)];
  const std::string text = decoder_.decode({tokens_[static_cast<std::size_t>(id)]});
  if (text.empty() || text.find("\xEF\xBF\xBD") != std::string::npos) return tokens_[static_cast<std::size_t>(id)];
  std::string shown;
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20)
      shown += fmt::format("<0x{:02X}>", static_cast<unsigned char>(c));
    else
      shown.push_back(c);
  }
  return shown == " " ? "' '" : shown;
}

}  // namespace ustrain
