// The tokenizer side of moving models to and from Hugging Face.
//
// Export: the special token ids that config.json and generation_config.json carry, and for a
// sentencepiece tokenizer the files AutoTokenizer loads, in LlamaTokenizer's conventions:
// tokenizer.model (the model's own bytes), tokenizer_config.json and special_tokens_map.json;
// for a Hugging Face tokenizer its tokenizer.json as it is and a tokenizer_config.json
// (PreTrainedTokenizerFast; BOS the first of <s>, <|begin_of_text|>, ... it has, else EOS).
// ustrain adds no BOS when it tokenizes (documents end with EOS, and a new one starts after
// it), so add_bos_token is false, and a model without a BOS piece names EOS as its BOS. The
// byte tokenizer has no Hugging Face class: only its ids are written (docs/checkpoints.md).
//
// Import: which tokenizer the new checkpoint keeps (import_tokenizer).
#pragma once

#include <string>
#include <vector>

#include "core/checkpoint/tokenizer.h"
#include "core/interop/hf_llama.h"
#include "core/recipe/recipe.h"

namespace ustrain {

HfTokenIds hf_token_ids(const TokenizerSnapshot& tokenizer);

// generation_config.json: the token ids generate() starts, stops and pads with.
std::string generation_config_json(const HfTokenIds& ids);

// Writes tokenizer.model, tokenizer_config.json and special_tokens_map.json into `dir` for a
// sentencepiece tokenizer, tokenizer.json and tokenizer_config.json for a Hugging Face one,
// and returns their names; nothing for the others.
std::vector<std::string> write_hf_tokenizer_files(const std::string& dir, const TokenizerSnapshot& tokenizer,
                                                  std::int64_t max_seq_len);

// The tokenizer an imported model's checkpoint keeps. `choice`: "byte", a sentencepiece
// .model file or a tokenizer.json, "none" (an external tokenizer ustrain does not read), or
// "auto": the tokenizer.model beside the weights, else the tokenizer.json (its EOS from the
// tokenizer_config.json beside it, else config.json's eos_token_id); else, when the recipe names a dataset, the byte
// tokenizer if it says data.tokenizer = "byte" or the dataset's; else the byte tokenizer when
// the recipe says so and config.json's EOS is the byte tokenizer's (a model ustrain
// exported); else none. `how` receives where it came from. UserError when the tokenizer has more ids than
// the model's vocabulary.
TokenizerSnapshot import_tokenizer(const std::string& choice, const HfModelFiles& model, const Recipe& recipe,
                                   std::string& how);

}  // namespace ustrain
