// A pre-tokenizer regex (tokenizer.json's Split, GPT-2's ByteLevel, tiktoken's pattern)
// compiled with PCRE2 in UTF mode with Unicode properties (\p{L}, \s, ... as in Oniguruma,
// fancy-regex and Rust's regex crate), JIT-compiled where the platform allows.
//
// Every search is bounded, so that no pattern and text can hang a conversion or take its
// memory: PCRE2's match and depth limits (scaled with the text, so a run of millions of spaces
// still splits), its heap limit, a JIT stack of at most 64 MiB, and the CPU time of the whole
// document (a RegexBudget, checked at each start of a match attempt, which catches patterns
// that rescan the rest of the text at every position). A search past a bound is a
// RegexLimitError.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/tokenizers/regex_budget.h"
#include "kernels/error.h"

struct pcre2_real_code_8;

namespace ustrain {

// A search that ran past its bounds; the message names the regex and the bound, and callers
// that know the document add where it came from.
class RegexLimitError : public UserError {
 public:
  using UserError::UserError;
};

class RegexSplitter {
 public:
  // UserError naming `where` and the position when PCRE2 cannot compile `pattern`.
  RegexSplitter(const std::string& pattern, const std::string& where);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends to `out` each match of the pattern in `text` and each stretch between matches
  // (tokenizers' "Isolated" behaviour), in order; together they are `text`. `text` must be
  // valid UTF-8 (it is not checked again). Safe to call from several threads at once, each
  // with its own budget: that of the document `text` belongs to.
  // RegexLimitError when the search runs past its bounds or the document past its budget.
  void split(std::string_view text, std::vector<std::string_view>& out, RegexBudget& budget) const;
  // The same stretches, each marked whether it is a match.
  void find(std::string_view text, std::vector<std::pair<std::string_view, bool>>& out, RegexBudget& budget) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
  std::string pattern_, where_;
};

}  // namespace ustrain
