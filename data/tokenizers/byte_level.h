// GPT-2's byte-level alphabet: each of the 256 bytes is shown as one printable Unicode
// character (bytes that are printable Latin-1 as themselves, the others as U+0100 onwards),
// so that byte-level BPE vocabularies (tokenizer.json's ByteLevel) are strings of characters.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace ustrain {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();
  // The UTF-8 of the character that stands for `byte`.
  const std::string& character(unsigned char byte) const { return characters_[byte]; }
  // The bytes a string of byte-level characters stands for; nullopt when a character is not
  // one of the 256 (an added token's plain text, for instance).
  std::optional<std::string> bytes_of(std::string_view characters) const;
  // `bytes` written in byte-level characters.
  std::string characters_of(std::string_view bytes) const;

 private:
  std::array<std::string, 256> characters_;
  std::array<std::int16_t, 0x180> byte_of_code_point_;  // -1: not a byte-level character
};

}  // namespace ustrain
