// Tokenizers, and how a dataset names the one it was made with.
//
// Two kinds are built in: the byte tokenizer (data/byte_tokenizer.h) and sentencepiece models
// (data/sentencepiece_tokenizer.h). Token ids converted from other tools' files (Megatron,
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
  // "byte" or "sentencepiece": the kind, as recorded in a dataset's manifest.
  virtual std::string identity() const = 0;
  // One token shown on its own, for tables: printable text, or "<0x0A>", "<eos>".
  virtual std::string piece(std::int32_t id) const = 0;
};

// What a dataset records about its tokenizer (manifest.json "tokenizer", shard attributes).
struct TokenizerIdentity {
  std::string kind;            // "byte" | "sentencepiece" | "external"
  std::string name;            // "byte", "sentencepiece", or the user's name for external ids
  std::int64_t vocab_size = 0;
  std::int32_t eos_id = -1;    // -1: no end-of-document id is known (external ids only)
  std::string model_file;      // sentencepiece: the model's file name in the dataset directory
  std::string model_checksum;  // sentencepiece: "crc32:..." of that file

  bool operator==(const TokenizerIdentity&) const = default;
  // e.g. "sentencepiece (vocab 8000, eos 1, model tokenizer.model crc32:1a2b3c4d)"
  std::string describe() const;
};

inline constexpr const char* kTokenizerKinds[] = {"byte", "sentencepiece", "external"};
inline constexpr const char* kDatasetModelFileName = "tokenizer.model";

// "byte" -> the byte tokenizer; a path to a sentencepiece model (an existing file, or a name
// ending in ".model") -> that model. UserError naming `spec` otherwise.
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& spec);

// True when `spec` names a sentencepiece model file rather than a tokenizer name.
bool names_model_file(const std::string& spec);

// The tokenizer of a dataset directory: byte, or the sentencepiece model stored in it (its
// checksum verified). UserError naming the dataset when it holds external ids, whose
// tokenizer ustrain does not have, or when the model file is missing or damaged.
std::unique_ptr<Tokenizer> open_dataset_tokenizer(const std::string& dataset_dir);

}  // namespace ustrain
