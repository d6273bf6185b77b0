// Tokenizers, and how a dataset names the one it was made with.
//
// Three kinds are built in: the byte tokenizer (data/tokenizers/byte_tokenizer.h), sentencepiece models
// (data/tokenizers/sentencepiece_tokenizer.h) and Hugging Face tokenizer.json files, tiktoken rank files
// among them once converted (data/tokenizers/hf_tokenizer.h). Token ids converted from other tools' files (Megatron,
// llm.c, NumPy) carry an "external" identity that the user names; ustrain cannot decode them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ustrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  // The text of `ids`. Control tokens (EOS) and ids outside the vocabulary decode to nothing.
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;
  virtual std::int64_t vocab_size() const = 0;
  // The end-of-document id, or -1 if the tokenizer has none.
  virtual std::int32_t eos_id() const = 0;
  // "byte", "sentencepiece" or "huggingface": the kind, as recorded in a dataset's manifest.
  virtual std::string identity() const = 0;
  // One token shown on its own, for tables: printable text, or "<0x0A>", "<eos>".
  virtual std::string piece(std::int32_t id) const = 0;
};

// What a dataset records about its tokenizer (manifest.json "tokenizer", shard attributes).
struct TokenizerIdentity {
  std::string kind;            // "byte" | "sentencepiece" | "huggingface" | "external"
  std::string name;            // the kind, or the user's name for external ids
  std::int64_t vocab_size = 0;
  std::int32_t eos_id = -1;    // -1: no end-of-document id is known (external, huggingface)
  std::string model_file;      // sentencepiece, huggingface: the model's file name in the directory
  std::string model_checksum;  // sentencepiece, huggingface: "crc32:..." of that file

  bool operator==(const TokenizerIdentity&) const = default;
  // e.g. "sentencepiece (vocab 8000, eos 1, model tokenizer.model crc32:1a2b3c4d)"
  std::string describe() const;
};

inline constexpr const char* kTokenizerKinds[] = {"byte", "sentencepiece", "huggingface", "external"};
inline constexpr const char* kDatasetModelFileName = "tokenizer.model";
inline constexpr const char* kDatasetTokenizerJsonName = "tokenizer.json";

// How a tiktoken rank file is read (data/tokenizers/tiktoken_file.h): its pre-tokenizer pattern (a known
// encoding's name or a regex; empty: told by the file's name) and extra "TOKEN=ID" specials.
struct TokenizerOptions {
  std::string tiktoken_pattern;
  std::vector<std::string> tiktoken_special_tokens;
};

// "byte" -> the byte tokenizer; a path ending in ".json" -> a Hugging Face tokenizer.json
// (its EOS from the tokenizer_config.json beside it); ".tiktoken" -> a tiktoken rank file;
// another file, or a name ending in ".model" -> a sentencepiece model. UserError naming
// `spec` otherwise.
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& spec, const TokenizerOptions& options = {});

// True when `spec` names a tokenizer file (model, tokenizer.json, .tiktoken) rather than a
// tokenizer name.
bool names_model_file(const std::string& spec);

// The file a dataset stores for `tokenizer` so that it can be opened again without the
// original (its bytes); empty for the byte tokenizer and sentencepiece, whose .model file is
// copied as it is.
std::string stored_tokenizer_json(const Tokenizer& tokenizer);

}  // namespace ustrain
