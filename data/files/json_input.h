// Parsing the JSON files ustrain reads (tokenizer.json, config.json, safetensors headers and
// indexes, dataset and checkpoint manifests, run records, metrics lines, ...), with a bound on
// nesting: the code that walks, copies or prints a parsed document recurses once per level, so
// a hostile file nested a hundred thousand levels deep would overflow the stack. Every JSON
// input goes through here, so each is refused with one message instead.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ustrain {

// The deepest nesting accepted. The files ustrain reads nest fewer than 20 levels (a
// tokenizer.json's sequences of normalizers, a checkpoint manifest's recipe); 256 leaves ample
// room for any legitimate file while recursion that deep needs only a few hundred KB of stack.
inline constexpr int kMaxJsonDepth = 256;

// `text` as JSON. A syntax error throws as nlohmann::json::parse does (parse_error, or
// out_of_range for a number beyond a double), for the caller to word with its file's context;
// nesting deeper than kMaxJsonDepth is a UserError naming `source` and the limit.
nlohmann::json parse_json(std::string_view text, const std::string& source);

// As parse_json, but a document that does not parse or nests too deeply comes back discarded
// (is_discarded()): for files ustrain skips or writes afresh when they are unreadable.
nlohmann::json parse_json_or_discarded(std::string_view text);

}  // namespace ustrain
