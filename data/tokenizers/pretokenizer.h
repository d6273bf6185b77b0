// tokenizer.json's pre-tokenizers that ustrain applies, in sequence: Split (a regex or a
// string; what becomes of a match: its own piece, removed, joined to the piece before or
// after, or joined with the matches next to it; optionally inverted), ByteLevel (GPT-2's regex and prefix space; its byte -> character mapping is
// left to the byte-level BPE, which works on raw bytes) and Metaspace (spaces as U+2581, the
// prefix scheme, splitting before each U+2581). Others are refused when the file is read.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizers/regex_splitter.h"

namespace ustrain {

// GPT-2's pre-tokenizer regex (openai/gpt-2 src/encoder.py; tokenizers' ByteLevel).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct PreTokenizerStep {
  enum class Kind { split, byte_level, metaspace };
  explicit PreTokenizerStep(Kind k) : kind(k) {}
  Kind kind;
  std::shared_ptr<const RegexSplitter> regex;  // split; byte_level with use_regex
  // split: the tokenizers library's SplitDelimiterBehavior for the matches, and `invert`
  // (the stretches between matches are the delimiters instead).
  enum class Behavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };
  Behavior behavior = Behavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;               // byte_level
  std::string replacement;                     // metaspace: the character that stands for ' '
  enum class Prepend { always, first, never } prepend = Prepend::always;  // metaspace
  bool split = true;                           // metaspace: a piece before each replacement
};

// A stretch of text on its way to the model: a view of the document, or of text a step wrote.
struct Piece {
  std::string_view text;
  bool at_start = false;  // begins the document (Metaspace's "first" scheme)
};

class PreTokenizer {
 public:
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps = {});
  // Applies every step to every piece; rewritten text lives in `arena`. Text is valid UTF-8.
  // The regex searches draw on `budget`, that of the document the pieces come from.
  void run(std::vector<Piece>& pieces, std::deque<std::string>& arena, RegexBudget& budget) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace ustrain
