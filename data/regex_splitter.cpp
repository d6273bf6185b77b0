#include "data/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                        &offset, nullptr);
  if (code_ == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw UserError(fmt::format("{}: the regex {} does not compile ({} at offset {})", where, pattern,
                                reinterpret_cast<const char*>(message), offset));
  }
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // where JIT is unavailable, pcre2_match interprets
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(code_); }

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::vector<std::pair<std::string_view, bool>> found;
  find(text, found);
  for (const auto& [piece, is_match] : found) out.push_back(piece);
}

void RegexSplitter::find(std::string_view text, std::vector<std::pair<std::string_view, bool>>& out) const {
  if (text.empty()) return;
  const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t gap = 0, at = 0;  // the unmatched stretch starts at gap; the next search at at
  while (at < text.size()) {
    int found = pcre2_match(code_, subject, text.size(), at, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    // The JIT's small stack can run out on long runs; the interpreter keeps its state on the heap.
    if (found == PCRE2_ERROR_JIT_STACKLIMIT)
      found = pcre2_match(code_, subject, text.size(), at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match.get(), nullptr);
    if (found == PCRE2_ERROR_NOMATCH) break;
    if (found < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(found, message, sizeof message);
      throw UserError(fmt::format("pre-tokenizer regex failed on the text ({})", reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* bounds = pcre2_get_ovector_pointer(match.get());
    const std::size_t begin = bounds[0], end = bounds[1];
    if (end == begin) {  // an empty match: step over one character, which stays in the gap
      at = begin + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    if (begin > gap) out.emplace_back(text.substr(gap, begin - gap), false);
    out.emplace_back(text.substr(begin, end - begin), true);
    gap = at = end;
  }
  if (gap < text.size()) out.emplace_back(text.substr(gap), false);
}

}  // namespace ustrain
