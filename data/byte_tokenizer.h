// The byte-level tokenizer: token i < 256 is byte i; specials follow the bytes.
// Lossless for any input, so text -> tokens -> text gives back the original bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ustrain {

class ByteTokenizer {
 public:
  static constexpr std::int32_t kEos = 256;
  static constexpr std::int64_t kVocabSize = 257;

  std::vector<std::int32_t> encode(std::string_view text) const;
  // Specials decode to nothing, except EOS, which decodes to `eos_text`.
  std::string decode(const std::vector<std::int32_t>& ids, std::string_view eos_text = "\n") const;
  std::string identity() const { return "byte"; }
};

}  // namespace ustrain
