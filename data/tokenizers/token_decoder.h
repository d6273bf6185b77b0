// tokenizer.json's decoders that ustrain applies: ByteLevel, Metaspace, and the sequence
// Replace / ByteFallback / Fuse / Strip that sentencepiece-style files use. Each works on the
// list of token strings, as in the tokenizers library, and the results are joined.
#pragma once

#include <string>
#include <vector>

#include "data/tokenizers/byte_level.h"

namespace ustrain {

struct DecoderStep {
  enum class Kind { byte_level, metaspace, byte_fallback, fuse, strip, replace };
  explicit DecoderStep(Kind k) : kind(k) {}
  Kind kind;
  std::string text;         // metaspace: the replacement character; strip: the character; replace: pattern
  std::string replacement;  // replace
  bool prepend = true;      // metaspace: its prepend_scheme is not "never" (the first token loses it)
  int start = 0, stop = 0;  // strip: at most this many from each end
};

class TokenDecoder {
 public:
  // No steps: the tokens joined by spaces, as the library does without a decoder.
  explicit TokenDecoder(std::vector<DecoderStep> steps = {});
  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<DecoderStep> steps_;
  ByteLevelAlphabet alphabet_;
};

}  // namespace ustrain
