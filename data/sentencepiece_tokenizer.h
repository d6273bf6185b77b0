// A sentencepiece model (.model file) as a Tokenizer. Encoding is const and safe to call from
// several threads at once, which parallel conversion relies on.
#pragma once

#include <memory>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ustrain {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // UserError naming `model_path` if it cannot be read or is not a sentencepiece model.
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::int32_t eos_id() const override { return eos_id_; }
  std::string identity() const override { return "sentencepiece"; }
  std::string piece(std::int32_t id) const override;

  const std::string& model_path() const { return model_path_; }

 private:
  std::string model_path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::int64_t vocab_size_ = 0;
  std::int32_t eos_id_ = -1;
};

}  // namespace ustrain
