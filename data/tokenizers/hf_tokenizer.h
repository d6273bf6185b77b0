// A Hugging Face tokenizer.json (the tokenizers library's format) as a Tokenizer: byte-level
// BPE (GPT-2, Llama 3, Qwen), sentencepiece-style BPE with byte fallback (Llama 2, Mistral),
// and tiktoken rank files converted to it (data/tokenizers/tiktoken_file.h). Encoding is what the
// library's encode(text, add_special_tokens=False) gives: added tokens are split out first,
// and no BOS or post-processor tokens are added (ustrain ends documents with EOS instead).
// Text that is not valid UTF-8 is encoded with U+FFFD in place of each invalid sequence.
// Encoding is const and safe from several threads at once.
#pragma once

#include <memory>
#include <optional>

#include "data/tokenizers/added_tokens.h"
#include "data/tokenizers/bpe_model.h"
#include "data/tokenizers/pretokenizer.h"
#include "data/tokenizers/text_normalizer.h"
#include "data/tokenizers/token_decoder.h"
#include "data/tokenizers/tokenizer.h"

namespace ustrain {

class HfTokenizer final : public Tokenizer {
 public:
  // `json`: the text of a tokenizer.json; `label` names it in messages. `eos_token`: the
  // content of the end-of-document token (tokenizer_config.json's eos_token); empty: the
  // first special token of </s>, <|endoftext|>, <|end_of_text|>, <eos>; none of them: no EOS.
  // UserError (hf_tokenizer_json.h) for a file ustrain cannot tokenize exactly.
  HfTokenizer(std::string json, const std::string& label, const std::string& eos_token = "");
  // The tokenizer.json at `path`, its EOS named by the tokenizer_config.json beside it if any.
  static std::unique_ptr<HfTokenizer> from_file(const std::string& path);
  // The same tokenizer with EOS `eos_id` (as a dataset or checkpoint recorded it; -1: none).
  static std::unique_ptr<HfTokenizer> with_eos_id(std::string json, const std::string& label, std::int32_t eos_id);

  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(tokens_.size()); }
  std::int32_t eos_id() const override { return eos_id_; }
  // Ends documents with token `id` instead (data/convert/document_eos.h); before any encoding.
  void set_eos_id(std::int32_t id) { eos_id_ = id; }
  std::string identity() const override { return "huggingface"; }
  std::string piece(std::int32_t id) const override;

  // The file's text, which datasets and checkpoints store as tokenizer.json.
  const std::string& json() const { return json_; }
  // The id of a token (added or in the vocabulary); -1 if there is none.
  std::int32_t token_id(const std::string& content) const;
  // A token as the file writes it; empty for ids without one.
  const std::string& token(std::int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }

 private:
  void encode_text(std::string_view text, bool at_start, std::vector<std::int32_t>& out, RegexBudget& budget) const;

  std::string json_;
  std::vector<AddedToken> added_;
  AddedTokenMatcher raw_tokens_, normalized_tokens_;
  TextNormalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  TokenDecoder decoder_;
  std::vector<std::string> tokens_;  // by id, as the file writes them
  std::vector<bool> special_;        // by id: decoding leaves it out
  std::int32_t eos_id_ = -1;
};

}  // namespace ustrain
