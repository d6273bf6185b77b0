// Reading a Hugging Face tokenizer.json: which parts it has and their settings, checked
// against what ustrain implements. Anything else (a normalizer, pre-tokenizer, model,
// decoder or post-processor option ustrain does not apply) is refused with one message that
// names it, so a file is never tokenized otherwise than the tokenizers library would.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizers/added_tokens.h"
#include "data/tokenizers/bpe_model.h"
#include "data/tokenizers/pretokenizer.h"
#include "data/tokenizers/text_normalizer.h"
#include "data/tokenizers/token_decoder.h"

namespace ustrain {

// Token ids are below this: the tokenizer's tables are indexed by id, and 2^24 is far above
// any published vocabulary (the largest hold about 256K tokens) while keeping a forged id
// from asking for gigabytes.
constexpr std::int64_t kTokenIdLimit = std::int64_t{1} << 24;

struct HfTokenizerParts {
  std::vector<AddedToken> added_tokens;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  bool byte_level = false;                  // the pre-tokenizer ends with ByteLevel
  TokenIdMap vocab;                         // as the file writes the tokens
  std::vector<std::pair<std::string, std::string>> merges;
  BpeOptions bpe;
  std::string unk_token;                    // empty: none
  std::vector<DecoderStep> decoder;
};

// UserError naming `label` for JSON that does not parse, a part that is malformed, or one
// ustrain does not implement.
HfTokenizerParts parse_hf_tokenizer_json(const std::string& json_text, const std::string& label);

}  // namespace ustrain
