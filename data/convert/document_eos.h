// Which token ends each document of a conversion. A Hugging Face tokenizer's EOS comes from
// tokenizer_config.json, which for chat models (Qwen, Llama 3 Instruct) names the token that
// ends a chat turn (<|im_end|>, <|eot_id|>); pretraining documents end with the tokenizer's
// end-of-text token instead. The user may name the token (--eos-token) or its id (--eos-id).
#pragma once

#include <cstdint>
#include <string>

#include "data/tokenizers/tokenizer.h"

namespace ustrain {

struct EosChoice {
  std::string token;     // the token's content, e.g. "<|endoftext|>"; empty: not chosen
  std::int64_t id = -1;  // or its id; -1: not chosen
};

// Makes `tokenizer` end documents as chosen, and returns a line that says which token that is
// (empty when there is nothing to say: byte, sentencepiece). Without a choice, a Hugging Face
// tokenizer whose EOS ends a chat turn takes <|endoftext|> (or <|end_of_text|>) when it has
// that special token. `label` names the tokenizer file in messages. UserError naming the file
// when the token or id is not the tokenizer's, or when a tokenizer whose EOS is fixed
// (byte, sentencepiece) is given another one.
std::string choose_document_eos(Tokenizer& tokenizer, const EosChoice& choice, const std::string& label);

}  // namespace ustrain
