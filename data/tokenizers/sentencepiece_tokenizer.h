// A sentencepiece model (.model file) as a Tokenizer. Encoding is const and safe to call from
// several threads at once, which parallel conversion relies on.
#pragma once

#include <memory>

#include "data/tokenizers/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ustrain {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // UserError naming `model_path` if it cannot be read or is not a sentencepiece model.
  explicit SentencePieceTokenizer(const std::string& model_path);
  // A model held in memory (the bytes of a .model file); `label` names it in messages.
  static std::unique_ptr<SentencePieceTokenizer> from_bytes(const std::string& model, const std::string& label);
  ~SentencePieceTokenizer() override;

  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::int32_t eos_id() const override { return eos_id_; }
  std::string identity() const override { return "sentencepiece"; }
  std::string piece(std::int32_t id) const override;

  const std::string& model_path() const { return model_path_; }
  // The other special ids sentencepiece defines; -1 where the model has none.
  std::int32_t unk_id() const;
  std::int32_t bos_id() const;
  std::int32_t pad_id() const;
  // A piece as the model stores it ("</s>", U+2581 "the"), where piece() shows it for people.
  std::string raw_piece(std::int32_t id) const;
  // Whether encoding puts U+2581 (sentencepiece's space) before the text: add_dummy_prefix.
  bool adds_dummy_prefix() const;

 private:
  SentencePieceTokenizer() = default;
  void load_status(const std::string& what, bool ok, const std::string& status);
  std::string model_path_;  // or the label of a model loaded from memory
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::int64_t vocab_size_ = 0;
  std::int32_t eos_id_ = -1;
};

}  // namespace ustrain
