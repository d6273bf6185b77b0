#include "data/tokenizers/added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "data/tokenizers/utf8.h"

namespace ustrain {
namespace {

// Rust's char::is_whitespace (the White_Space property) and is_alphanumeric (Alphabetic or
// a number), which the tokenizers library uses for these rules.
bool is_whitespace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }
bool is_word(char32_t c) {
  if (c == '_') return true;
  const auto type = u_charType(static_cast<UChar32>(c));
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || type == U_DECIMAL_DIGIT_NUMBER ||
         type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

char32_t last_code_point(std::string_view text, std::size_t& start) {
  start = text.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  std::size_t at = start;
  return next_code_point(text, at);
}

// Where the whitespace that ends `text` starts.
std::size_t trailing_space_start(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = 0;
    if (!is_whitespace(last_code_point(text.substr(0, end), start))) break;
    end = start;
  }
  return end;
}

std::size_t leading_space_length(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t next = at;
    if (!is_whitespace(next_code_point(text, next))) break;
    at = next;
  }
  return at;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::erase_if(tokens_, [](const AddedToken& t) { return t.content.empty(); });
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (std::uint32_t i = 0; i < tokens_.size(); ++i)
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  std::size_t done = 0;  // text before this is in segments already
  for (std::size_t at = 0; at < text.size();) {
    const AddedToken* match = nullptr;
    for (std::uint32_t i : by_first_byte_[static_cast<unsigned char>(text[at])])
      if (text.substr(at).starts_with(tokens_[i].content)) {
        match = &tokens_[i];
        break;
      }
    if (match == nullptr) {
      ++at;
      continue;
    }
    std::size_t start = at, stop = at + match->content.size();
    at = stop;  // a match that its rules reject still consumes its text, as in the library
    if (match->single_word) {
      std::size_t ignored = 0;
      const bool word_before = start > 0 && is_word(last_code_point(text.substr(0, start), ignored));
      std::size_t next = stop;
      const bool word_after = stop < text.size() && is_word(next_code_point(text, next));
      if (word_before || word_after) continue;
    }
    if (match->lstrip) start = std::max(trailing_space_start(text.substr(0, start)), done);
    if (match->rstrip) stop += leading_space_length(text.substr(stop));
    if (start > done) out.push_back({text.substr(done, start - done), -1, done});
    out.push_back({text.substr(start, stop - start), match->id, start});
    done = at = stop;
  }
  if (done < text.size()) out.push_back({text.substr(done), -1, done});
}

}  // namespace ustrain
