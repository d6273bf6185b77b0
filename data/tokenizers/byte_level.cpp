#include "data/tokenizers/byte_level.h"

#include "data/tokenizers/utf8.h"

namespace ustrain {

// bytes_to_unicode() of GPT-2's encoder.py: the printable ranges ! to ~, U+00A1 to U+00AC and
// U+00AE to U+00FF stand for themselves; the other 68 bytes take U+0100, U+0101, ... in order.
ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_code_point_.fill(-1);
  const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t code_point = printable(b) ? static_cast<char32_t>(b) : next++;
    characters_[static_cast<std::size_t>(b)] = utf8_of(code_point);
    byte_of_code_point_[code_point] = static_cast<std::int16_t>(b);
  }
}

std::optional<std::string> ByteLevelAlphabet::bytes_of(std::string_view characters) const {
  std::string bytes;
  bytes.reserve(characters.size());
  for (std::size_t at = 0; at < characters.size();) {
    const char32_t c = next_code_point(characters, at);
    if (c >= byte_of_code_point_.size() || byte_of_code_point_[c] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte_of_code_point_[c]));
  }
  return bytes;
}

std::string ByteLevelAlphabet::characters_of(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) out += characters_[static_cast<unsigned char>(b)];
  return out;
}

}  // namespace ustrain
