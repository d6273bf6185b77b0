// tokenizer.json's added tokens (special tokens such as <|endoftext|> among them): found in
// the text before pre-tokenization, leftmost first and the longest of those starting at the
// same place, honouring single_word, lstrip and rstrip as the tokenizers library does.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ustrain {

struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool special = false;      // decoding leaves it out
  bool single_word = false;  // matches only between non-word characters
  bool lstrip = false;       // takes the whitespace before it
  bool rstrip = false;       // takes the whitespace after it
  bool normalized = false;   // matched in the normalized text, not the raw text
};

// Text cut at the added tokens: each segment is either plain text (id -1) or one token.
struct TextSegment {
  std::string_view text;
  std::int32_t id = -1;
  std::size_t offset = 0;  // where it starts in the text that was split
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens = {});
  bool empty() const { return tokens_.empty(); }
  // Appends the segments of `text` to `out`.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  std::vector<AddedToken> tokens_;                    // longest content first
  std::array<std::vector<std::uint32_t>, 256> by_first_byte_;  // indices into tokens_
};

}  // namespace ustrain
