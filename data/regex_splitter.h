// A pre-tokenizer regex (tokenizer.json's Split, GPT-2's ByteLevel, tiktoken's pattern)
// compiled with PCRE2 in UTF mode with Unicode properties (\p{L}, \s, ... as in Oniguruma,
// fancy-regex and Rust's regex crate), JIT-compiled where the platform allows.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace ustrain {

class RegexSplitter {
 public:
  // UserError naming `where` and the position when PCRE2 cannot compile `pattern`.
  RegexSplitter(const std::string& pattern, const std::string& where);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends to `out` each match of the pattern in `text` and each stretch between matches
  // (tokenizers' "Isolated" behaviour), in order; together they are `text`. `text` must be
  // valid UTF-8 (it is not checked again). Safe to call from several threads at once.
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  // The same stretches, each marked whether it is a match.
  void find(std::string_view text, std::vector<std::pair<std::string_view, bool>>& out) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace ustrain
