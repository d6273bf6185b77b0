// The byte-level tokenizer: token i < 256 is byte i; EOS (256) follows the bytes.
// Lossless for any input, so text -> tokens -> text gives back the original bytes.
#pragma once

#include "data/tokenizers/tokenizer.h"

namespace ustrain {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr std::int32_t kEos = 256;
  static constexpr std::int64_t kVocabSize = 257;

  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
  std::int64_t vocab_size() const override { return kVocabSize; }
  std::int32_t eos_id() const override { return kEos; }
  std::string identity() const override { return "byte"; }
  std::string piece(std::int32_t id) const override;
};

}  // namespace ustrain
