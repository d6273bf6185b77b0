#include "data/tokenizers/tiktoken_file.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <istream>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/hf_tokenizer_json.h"
#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

struct KnownEncoding {
  const char* name;
  const char* pattern;
  std::vector<std::pair<const char*, std::int32_t>> special_tokens;
};

// The patterns and special tokens of openai/tiktoken's tiktoken_ext/openai_public.py.
const std::vector<KnownEncoding>& known_encodings() {
  static const std::vector<KnownEncoding> known = {
      {"gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
       {{"<|endoftext|>", 50256}}},
      {"cl100k_base",
       R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       {{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}, {"<|fim_middle|>", 100259}, {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}}},
      {"o200k_base",
       R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
       R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
       R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
  };
  return known;
}

const KnownEncoding* find_known(const std::string& name) {
  const std::string canonical = name == "r50k_base" ? "gpt2" : name == "cl100k" ? "cl100k_base"
                                : name == "o200k"   ? "o200k_base"
                                                    : name;
  for (const KnownEncoding& e : known_encodings())
    if (canonical == e.name) return &e;
  return nullptr;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool decode_base64(std::string_view text, std::string& out) {
  out.clear();
  std::uint32_t bits = 0;
  int count = 0;
  std::size_t end = text.size();
  while (end > 0 && text[end - 1] == '=') --end;
  if (text.size() % 4 != 0 || text.size() - end > 2) return false;
  for (std::size_t i = 0; i < end; ++i) {
    const int v = base64_value(text[i]);
    if (v < 0) return false;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return true;
}


// Far beyond real files (the longest token of gpt2, cl100k_base and o200k_base is 128
// bytes): deriving a token's merges looks up every split of it, so its cost grows with the
// square of its length.
constexpr std::size_t kMaxTokenBytes = 1024;
// The merges' tokens, in bytes, against the file's size: real files come to about 1 (0.8 for
// gpt2, 1.0 for cl100k_base, 0.9 for o200k_base). Ranks made up of runs of one byte, each
// shorter run also a token, imply merges that grow with the cube of the run's length.
constexpr std::size_t kMaxMergeBytesPerFileByte = 8;

// Looks up byte strings by view, without copying each split of a token.
struct BytesHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view bytes) const { return std::hash<std::string_view>{}(bytes); }
};

struct Ranks {
  std::unordered_map<std::string, std::int32_t, BytesHash, std::equal_to<>> of;  // bytes -> rank
  std::vector<std::string> by_rank;
  std::size_t file_bytes = 0;
};

Ranks read_ranks(const std::string& path, std::istream& in) {
  Ranks ranks;
  std::string line, bytes;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    ranks.file_bytes += line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    long long rank = -1;
    try {
      if (space != std::string::npos) rank = std::stoll(line.substr(space + 1));
    } catch (const std::exception&) {
    }
    if (space == std::string::npos || rank < 0 || rank >= kTokenIdLimit || !decode_base64(line.substr(0, space), bytes) ||
        bytes.empty())
      throw UserError(fmt::format("{} line {}: not 'BASE64-TOKEN RANK'; this is not a tiktoken rank file", path, number));
    if (bytes.size() > kMaxTokenBytes)
      throw UserError(fmt::format("{} line {}: the token is {} bytes long, over the maximum of {} (real tiktoken files' "
                                  "longest are 128 bytes); this is not a tiktoken rank file ustrain can use",
                                  path, number, bytes.size(), kMaxTokenBytes));
    if (static_cast<std::size_t>(rank) != ranks.by_rank.size())
      throw UserError(fmt::format("{} line {}: rank {} where {} was expected; ranks must count up from 0", path,
                                  number, rank, ranks.by_rank.size()));
    if (!ranks.of.emplace(bytes, static_cast<std::int32_t>(rank)).second)
      throw UserError(fmt::format("{} line {}: the token is listed twice", path, number));
    ranks.by_rank.push_back(bytes);
  }
  if (ranks.by_rank.empty()) throw UserError(fmt::format("{} holds no ranks: it is not a tiktoken rank file", path));
  for (int b = 0; b < 256; ++b)
    if (const char byte = static_cast<char>(b); !ranks.of.contains(std::string_view(&byte, 1)))
      throw UserError(fmt::format("{}: byte 0x{:02X} has no rank, so some text could not be encoded", path, b));
  return ranks;
}

struct MergeRow {
  std::int32_t rank, left, right;
};

// Every split of a token into two tokens is a merge, ranked by the token's rank and then by
// its parts' ranks: BPE by these merges gives tiktoken's lowest-rank-first result.
std::vector<MergeRow> derive_merges(const std::string& path, const Ranks& ranks) {
  const std::size_t max_merge_bytes = kMaxMergeBytesPerFileByte * ranks.file_bytes;
  std::vector<MergeRow> merges;
  std::size_t merge_bytes = 0;
  for (std::size_t rank = 0; rank < ranks.by_rank.size(); ++rank) {
    const std::string_view token = ranks.by_rank[rank];
    for (std::size_t at = 1; at < token.size(); ++at) {
      const auto l = ranks.of.find(token.substr(0, at));
      if (l == ranks.of.end()) continue;
      const auto r = ranks.of.find(token.substr(at));
      if (r == ranks.of.end()) continue;
      merges.push_back({static_cast<std::int32_t>(rank), l->second, r->second});
      if ((merge_bytes += token.size()) > max_merge_bytes)
        throw UserError(fmt::format("{}: up to rank {} its tokens already split into other tokens {} ways, {:.1f} MB "
                                    "of merges, more than {} times the file's size (real tiktoken files come to "
                                    "about their own size): the ranks look made up (runs of one byte with every "
                                    "shorter run a token?), and converting them would take memory without bound",
                                    path, rank, merges.size(), static_cast<double>(merge_bytes) / 1e6,
                                    kMaxMergeBytesPerFileByte));
    }
  }
  std::sort(merges.begin(), merges.end(), [](const MergeRow& a, const MergeRow& b) {
    return std::tie(a.rank, a.left, a.right) < std::tie(b.rank, b.left, b.right);
  });
  return merges;
}

// The known encoding's special tokens, then the "TOKEN=ID" options; none may take a rank's id.
std::map<std::string, std::int32_t> special_tokens(const std::string& path, const KnownEncoding* known,
                                                   const TiktokenOptions& options, const std::string& pattern_name,
                                                   std::size_t ranks) {
  std::map<std::string, std::int32_t> specials;
  if (known)
    for (const auto& [content, id] : known->special_tokens) specials[content] = id;
  for (const std::string& spec : options.special_tokens) {
    const std::size_t eq = spec.rfind('=');
    std::int64_t id = -1;
    try {
      if (eq != std::string::npos && eq > 0) id = std::stoll(spec.substr(eq + 1));
    } catch (const std::exception&) {
    }
    if (id < 0 || id >= kTokenIdLimit)
      throw UserError(fmt::format("special token '{}' is not TOKEN=ID with an id below 2^24 (e.g. "
                                  "'<|endoftext|>=100257')",
                                  abbreviate(spec)));
    specials[spec.substr(0, eq)] = static_cast<std::int32_t>(id);
  }
  for (const auto& [content, id] : specials)
    if (static_cast<std::size_t>(id) < ranks)
      throw UserError(fmt::format("{}: special token {} takes id {}, which rank {} already has: is this the {} "
                                  "encoding's file?",
                                  path, abbreviate(content), id, id, abbreviate(pattern_name)));
  return specials;
}

// The pre-tokenizer regex: a known encoding's, or the option's own; its name for messages.
const KnownEncoding* choose_pattern(const std::string& path, const TiktokenOptions& options, std::string& pattern_name) {
  pattern_name = options.pattern.empty() ? std::filesystem::path(path).stem().string() : options.pattern;
  const KnownEncoding* known = find_known(pattern_name);
  if (options.pattern.empty() && !known)
    throw UserError(fmt::format("{}: a tiktoken file does not say how text is split before BPE: pass "
                                "--tiktoken-pattern gpt2|cl100k_base|o200k_base or the regex itself",
                                path));
  // A plain word is meant as a name: a mistyped one must not become a regex matching itself.
  if (!known && std::all_of(pattern_name.begin(), pattern_name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
    throw UserError(fmt::format("--tiktoken-pattern '{}' is not a known encoding (gpt2, r50k_base, cl100k_base, "
                                "o200k_base): name one of them or give the pre-tokenizer regex itself",
                                abbreviate(pattern_name)));
  return known;
}

}  // namespace

std::string known_tiktoken_pattern(const std::string& name) {
  const KnownEncoding* known = find_known(name);
  return known ? known->pattern : "";
}

std::string tiktoken_to_tokenizer_json(const std::string& path, const TiktokenOptions& options) {
  std::istringstream in(read_regular_file(path));
  std::string pattern_name;
  const KnownEncoding* known = choose_pattern(path, options, pattern_name);
  const std::string pattern = known ? known->pattern : options.pattern;
  const Ranks ranks = read_ranks(path, in);
  const std::map<std::string, std::int32_t> specials =
      special_tokens(path, known, options, pattern_name, ranks.by_rank.size());

  const ByteLevelAlphabet alphabet;
  nlohmann::json vocab = nlohmann::json::object();
  const std::vector<std::string>& by_rank = ranks.by_rank;
  for (std::size_t rank = 0; rank < by_rank.size(); ++rank) vocab[alphabet.characters_of(by_rank[rank])] = rank;
  nlohmann::json merge_list = nlohmann::json::array();
  for (const MergeRow& m : derive_merges(path, ranks))
    merge_list.push_back({alphabet.characters_of(by_rank[static_cast<std::size_t>(m.left)]),
                          alphabet.characters_of(by_rank[static_cast<std::size_t>(m.right)])});

  nlohmann::json added = nlohmann::json::array();
  std::vector<std::pair<std::int32_t, std::string>> ordered;
  for (const auto& [content, id] : specials) ordered.emplace_back(id, content);
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [id, content] : ordered)
    added.push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  nlohmann::json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"},        {"dropout", nullptr},   {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},          {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},    {"byte_fallback", false}, {"ignore_merges", true},
                {"vocab", vocab},       {"merges", merge_list}};
  return j.dump() + "\n";
}

}  // namespace ustrain
