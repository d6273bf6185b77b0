// tiktoken rank files (.tiktoken: one "BASE64-TOKEN RANK" per line) turned into the
// equivalent tokenizer.json (byte-level BPE, the pattern as a Split pre-tokenizer, merges
// derived from the ranks as transformers' TikTokenConverter does, ignore_merges), so that a
// dataset or checkpoint stores one self-contained file and HfTokenizer encodes it.
#pragma once

#include <string>
#include <vector>

namespace ustrain {

struct TiktokenOptions {
  // A known encoding (gpt2 / r50k_base, cl100k_base, o200k_base; cl100k and o200k too) or a
  // regex. Empty: the rank file's name without .tiktoken, when it is a known encoding.
  std::string pattern;
  // "TOKEN=ID" special tokens, added to (or, by TOKEN, replacing) a known encoding's.
  std::vector<std::string> special_tokens;
};

// The pre-tokenizer regex of a known encoding; empty when `name` is not one.
std::string known_tiktoken_pattern(const std::string& name);

// The tokenizer.json text for the rank file at `path`. UserError naming the file and line
// for a malformed file or a token over 1024 bytes, naming the file for ranks whose merges
// come to more than 8 times its size, and for a missing or unknown pattern, or bad special
// tokens.
std::string tiktoken_to_tokenizer_json(const std::string& path, const TiktokenOptions& options);

}  // namespace ustrain
