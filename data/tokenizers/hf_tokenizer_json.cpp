#include "data/tokenizers/hf_tokenizer_json.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "data/files/json_input.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using Json = nlohmann::json;

// Reads one part of the file, saying where in it a problem lies.
class PartReader {
 public:
  explicit PartReader(const std::string& label) : label_(label) {}

  [[noreturn]] void refuse(const std::string& where, const std::string& what) const {
    throw UserError(fmt::format("{}: {} {} is not supported by ustrain, so the file is refused rather than "
                                "tokenized differently from the tokenizers library",
                                label_, where, what));
  }
  [[noreturn]] void malformed(const std::string& where, const std::string& what) const {
    throw UserError(fmt::format("{}: {} {}; the file is not a valid tokenizer.json", label_, where, what));
  }
  // A token's id: an unsigned integer below kTokenIdLimit.
  std::int32_t id(const Json& value, const std::string& where, const std::string& token) const {
    if (!value.is_number_unsigned())
      malformed(where, fmt::format("gives the token '{}' an id that is not a number", abbreviate(token)));
    const auto id = value.get<std::uint64_t>();
    if (id >= static_cast<std::uint64_t>(kTokenIdLimit))
      refuse(where, fmt::format("with the id {} (token '{}'; ids must be below 2^24)", id, abbreviate(token)));
    return static_cast<std::int32_t>(id);
  }
  std::string text(const Json& j, const char* key, const std::string& where, const std::string& otherwise) const {
    if (!j.contains(key) || j[key].is_null()) return otherwise;
    if (!j[key].is_string()) malformed(where, fmt::format("has a '{}' that is not a string", key));
    return j[key].get<std::string>();
  }
  bool flag(const Json& j, const char* key, const std::string& where, bool otherwise) const {
    if (!j.contains(key) || j[key].is_null()) return otherwise;
    if (!j[key].is_boolean()) malformed(where, fmt::format("has a '{}' that is not true or false", key));
    return j[key].get<bool>();
  }
  std::string type(const Json& j, const std::string& where) const {
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) malformed(where, "has no \"type\"");
    return j["type"].get<std::string>();
  }
  // A Replace or Split pattern: {"String": s} gives s; {"Regex": r} is refused unless allowed.
  std::string pattern(const Json& j, const std::string& where, bool* is_regex) const {
    if (!j.contains("pattern") || !j["pattern"].is_object()) malformed(where, "has no pattern");
    const Json& p = j["pattern"];
    if (p.contains("String") && p["String"].is_string()) {
      if (is_regex) *is_regex = false;
      return p["String"].get<std::string>();
    }
    if (p.contains("Regex") && p["Regex"].is_string()) {
      if (!is_regex) refuse(where, "with a Regex pattern");
      *is_regex = true;
      return p["Regex"].get<std::string>();
    }
    malformed(where, "has a pattern that is neither String nor Regex");
  }
  const std::string& label() const { return label_; }

 private:
  const std::string& label_;
};

// A Metaspace's prepend scheme: prepend_scheme, or the older add_prefix_space.
PreTokenizerStep::Prepend prepend_scheme(const PartReader& r, const Json& j, const std::string& where) {
  const std::string scheme = r.text(j, "prepend_scheme", where, "");
  if (scheme.empty())
    return r.flag(j, "add_prefix_space", where, true) ? PreTokenizerStep::Prepend::always
                                                      : PreTokenizerStep::Prepend::never;
  if (scheme == "always") return PreTokenizerStep::Prepend::always;
  if (scheme == "first") return PreTokenizerStep::Prepend::first;
  if (scheme == "never") return PreTokenizerStep::Prepend::never;
  r.refuse(where, fmt::format("with prepend_scheme '{}'", abbreviate(scheme)));
}

std::string one_character(const PartReader& r, const Json& j, const char* key, const std::string& where) {
  const std::string c = r.text(j, key, where, "\xE2\x96\x81");  // U+2581
  if (c.empty()) r.malformed(where, fmt::format("has an empty '{}'", key));
  return c;
}

void read_normalizer(const PartReader& r, const Json& j, std::vector<NormalizerStep>& out) {
  if (j.is_null()) return;
  const std::string type = r.type(j, "normalizer");
  const std::string where = fmt::format("normalizer '{}'", abbreviate(type));
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) r.malformed(where, "has no list of normalizers");
    for (const Json& step : j["normalizers"]) read_normalizer(r, step, out);
  } else if (type == "NFC") {
    out.push_back({NormalizerStep::Kind::nfc, "", ""});
  } else if (type == "Prepend") {
    out.push_back({NormalizerStep::Kind::prepend, r.text(j, "prepend", where, ""), ""});
  } else if (type == "Replace") {
    out.push_back({NormalizerStep::Kind::replace, r.pattern(j, where, nullptr), r.text(j, "content", where, "")});
  } else {
    r.refuse("normalizer", fmt::format("'{}' (ustrain applies NFC, Prepend, Replace of a string, and Sequence)",
                                       abbreviate(type)));
  }
}

// Regex syntax: the tokenizers library's patterns are Oniguruma's; PCRE2 reads the same for
// the constructs tokenizer files use (\p{..}, \s, (?i:..), lookahead, counted repeats).
std::string literal_regex(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void read_pre_tokenizer(const PartReader& r, const Json& j, HfTokenizerParts& parts) {
  if (j.is_null()) return;
  const std::string type = r.type(j, "pre_tokenizer");
  const std::string where = fmt::format("pre_tokenizer '{}'", abbreviate(type));
  if (parts.byte_level && type != "Sequence")
    r.refuse(where, "after ByteLevel (ustrain needs ByteLevel last among the pre-tokenizers)");
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) r.malformed(where, "has no list of pretokenizers");
    for (const Json& step : j["pretokenizers"]) read_pre_tokenizer(r, step, parts);
  } else if (type == "ByteLevel") {
    PreTokenizerStep step(PreTokenizerStep::Kind::byte_level);
    step.add_prefix_space = r.flag(j, "add_prefix_space", where, true);
    if (r.flag(j, "use_regex", where, true))
      step.regex = std::make_shared<const RegexSplitter>(kGpt2Pattern, r.label() + ": " + where);
    parts.pre_tokenizer.push_back(std::move(step));
    parts.byte_level = true;
  } else if (type == "Split") {
    bool is_regex = false;
    const std::string pattern = r.pattern(j, where, &is_regex);
    const std::string behavior = r.text(j, "behavior", where, "");
    using Behavior = PreTokenizerStep::Behavior;
    const std::pair<const char*, Behavior> kBehaviors[] = {
        {"Isolated", Behavior::isolated},
        {"Removed", Behavior::removed},
        {"MergedWithPrevious", Behavior::merged_with_previous},
        {"MergedWithNext", Behavior::merged_with_next},
        {"Contiguous", Behavior::contiguous}};
    const auto known = std::find_if(std::begin(kBehaviors), std::end(kBehaviors),
                                    [&](const auto& b) { return behavior == b.first; });
    if (known == std::end(kBehaviors)) r.refuse(where, fmt::format("with behavior '{}'", abbreviate(behavior)));
    PreTokenizerStep step(PreTokenizerStep::Kind::split);
    step.behavior = known->second;
    step.invert = r.flag(j, "invert", where, false);
    step.regex = std::make_shared<const RegexSplitter>(is_regex ? pattern : literal_regex(pattern), r.label() + ": " + where);
    parts.pre_tokenizer.push_back(std::move(step));
  } else if (type == "Metaspace") {
    PreTokenizerStep step(PreTokenizerStep::Kind::metaspace);
    step.replacement = one_character(r, j, "replacement", where);
    step.prepend = prepend_scheme(r, j, where);
    step.split = r.flag(j, "split", where, true);
    parts.pre_tokenizer.push_back(std::move(step));
  } else {
    r.refuse("pre_tokenizer",
             fmt::format("'{}' (ustrain applies ByteLevel, Split, Metaspace and Sequence)", abbreviate(type)));
  }
}

void read_decoder(const PartReader& r, const Json& j, std::vector<DecoderStep>& out) {
  if (j.is_null()) return;
  const std::string type = r.type(j, "decoder");
  const std::string where = fmt::format("decoder '{}'", abbreviate(type));
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) r.malformed(where, "has no list of decoders");
    for (const Json& step : j["decoders"]) read_decoder(r, step, out);
  } else if (type == "ByteLevel") {
    out.emplace_back(DecoderStep::Kind::byte_level);
  } else if (type == "Metaspace") {
    DecoderStep step(DecoderStep::Kind::metaspace);
    step.text = one_character(r, j, "replacement", where);
    step.prepend = prepend_scheme(r, j, where) != PreTokenizerStep::Prepend::never;
    out.push_back(std::move(step));
  } else if (type == "ByteFallback") {
    out.emplace_back(DecoderStep::Kind::byte_fallback);
  } else if (type == "Fuse") {
    out.emplace_back(DecoderStep::Kind::fuse);
  } else if (type == "Strip") {
    DecoderStep step(DecoderStep::Kind::strip);
    step.text = r.text(j, "content", where, " ");
    const auto count = [&](const char* key) {
      if (!j.contains(key) || !j[key].is_number_unsigned()) r.malformed(where, fmt::format("has no count '{}'", key));
      return static_cast<int>(std::min<std::uint64_t>(j[key].get<std::uint64_t>(), 1u << 30));
    };
    step.start = count("start");
    step.stop = count("stop");
    out.push_back(std::move(step));
  } else if (type == "Replace") {
    DecoderStep step(DecoderStep::Kind::replace);
    step.text = r.pattern(j, where, nullptr);
    step.replacement = r.text(j, "content", where, "");
    out.push_back(std::move(step));
  } else {
    r.refuse("decoder", fmt::format("'{}' (ustrain applies ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace "
                                    "and Sequence)",
                                    abbreviate(type)));
  }
}

// ustrain encodes without the post-processor's special tokens (add_special_tokens=False:
// documents end with EOS instead), so only processors that add tokens or change offsets pass.
void check_post_processor(const PartReader& r, const Json& j) {
  if (j.is_null()) return;
  const std::string type = r.type(j, "post_processor");
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) r.malformed("post_processor 'Sequence'", "has no list");
    for (const Json& step : j["processors"]) check_post_processor(r, step);
  } else if (type != "ByteLevel" && type != "TemplateProcessing") {
    r.refuse("post_processor", fmt::format("'{}' (ustrain accepts ByteLevel and TemplateProcessing, whose special "
                                           "tokens it does not add)",
                                           abbreviate(type)));
  }
}

void read_model(const PartReader& r, const Json& j, HfTokenizerParts& parts) {
  if (!j.is_object()) r.malformed("model", "is missing");
  const std::string type = j.contains("type") ? r.type(j, "model") : (j.contains("merges") ? "BPE" : "unknown");
  if (type != "BPE") r.refuse("model", fmt::format("'{}' (ustrain implements BPE)", abbreviate(type)));
  if (j.contains("dropout") && !j["dropout"].is_null() && j["dropout"].get<double>() != 0.0)
    r.refuse("model 'BPE'", "with dropout (random merges)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!r.text(j, key, "model 'BPE'", "").empty()) r.refuse("model 'BPE'", fmt::format("with a {}", key));
  if (!j.contains("vocab") || !j["vocab"].is_object()) r.malformed("model 'BPE'", "has no vocab object");
  for (const auto& [token, id] : j["vocab"].items()) parts.vocab.emplace(token, r.id(id, "model 'BPE'", token));
  if (!j.contains("merges") || !j["merges"].is_array()) r.malformed("model 'BPE'", "has no merges list");
  parts.merges.reserve(j["merges"].size());
  for (const Json& merge : j["merges"]) {
    if (merge.is_string()) {  // "left right"
      const std::string text = merge.get<std::string>();
      const std::size_t space = text.find(' ', 1);
      if (space == std::string::npos)
        r.malformed("model 'BPE'", fmt::format("has the merge '{}' without a space", abbreviate(text)));
      parts.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      parts.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      r.malformed("model 'BPE'",
                  fmt::format("has the merge {} that is neither \"a b\" nor [a, b]", abbreviate(merge.dump())));
    }
  }
  parts.bpe.byte_fallback = r.flag(j, "byte_fallback", "model 'BPE'", false);
  parts.bpe.fuse_unk = r.flag(j, "fuse_unk", "model 'BPE'", false);
  parts.bpe.ignore_merges = r.flag(j, "ignore_merges", "model 'BPE'", false);
  parts.unk_token = r.text(j, "unk_token", "model 'BPE'", "");
}

void read_added_tokens(const PartReader& r, const Json& j, HfTokenizerParts& parts) {
  if (j.is_null()) return;
  if (!j.is_array()) r.malformed("added_tokens", "is not a list");
  for (const Json& t : j) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_unsigned() || !t.contains("content") ||
        !t["content"].is_string())
      r.malformed("added_tokens", fmt::format("has the entry {} without an id and content", abbreviate(t.dump())));
    AddedToken token;
    token.content = t["content"].get<std::string>();
    const std::string where = fmt::format("added token '{}'", abbreviate(token.content));
    token.id = r.id(t["id"], "added_tokens", token.content);
    token.special = r.flag(t, "special", where, false);
    token.single_word = r.flag(t, "single_word", where, false);
    token.lstrip = r.flag(t, "lstrip", where, false);
    token.rstrip = r.flag(t, "rstrip", where, false);
    token.normalized = r.flag(t, "normalized", where, !token.special);
    parts.added_tokens.push_back(std::move(token));
  }
}

}  // namespace

HfTokenizerParts parse_hf_tokenizer_json(const std::string& json_text, const std::string& label) {
  Json j;
  try {
    j = parse_json(json_text, label);
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("{} is not valid JSON ({}): pass a tokenizer.json written by the tokenizers library",
                                label, e.what()));
  }
  const PartReader r(label);
  if (!j.is_object() || !j.contains("model"))
    throw UserError(fmt::format("{} has no \"model\": it is not a tokenizer.json of the tokenizers library", label));
  try {
    if (j.contains("truncation") && !j["truncation"].is_null())
      r.refuse("truncation", "(it would cut documents; set it to null)");
    if (j.contains("padding") && !j["padding"].is_null()) r.refuse("padding", "(set it to null)");
    HfTokenizerParts parts;
    read_added_tokens(r, j.value("added_tokens", Json()), parts);
    read_normalizer(r, j.value("normalizer", Json()), parts.normalizer);
    read_pre_tokenizer(r, j.value("pre_tokenizer", Json()), parts);
    read_model(r, j["model"], parts);
    check_post_processor(r, j.value("post_processor", Json()));
    read_decoder(r, j.value("decoder", Json()), parts.decoder);
    return parts;
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("{}: a field has an unexpected type ({}); the file is not a valid tokenizer.json",
                                label, e.what()));
  }
}

}  // namespace ustrain
