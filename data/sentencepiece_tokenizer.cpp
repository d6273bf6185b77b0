#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : model_path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (!std::filesystem::is_regular_file(model_path))
    throw UserError(fmt::format("sentencepiece model {} not found: check the path, or train one with "
                                "`ustrain data tokenizer train`",
                                model_path));
  const auto status = processor_->Load(model_path);
  if (!status.ok())
    throw UserError(fmt::format("{} is not a readable sentencepiece model ({}): pass a .model file "
                                "written by sentencepiece or `ustrain data tokenizer train`",
                                model_path, status.ToString()));
  vocab_size_ = processor_->GetPieceSize();
  eos_id_ = processor_->eos_id();
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<std::int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok())
    throw UserError(fmt::format("sentencepiece model {} cannot encode the text ({})", model_path_,
                                status.ToString()));
  return std::vector<std::int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::vector<int> valid;
  valid.reserve(ids.size());
  for (std::int32_t id : ids)
    if (id >= 0 && id < vocab_size_) valid.push_back(id);
  std::string text;
  if (!processor_->Decode(valid, &text).ok()) return {};
  return text;
}

std::string SentencePieceTokenizer::piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size_) return fmt::format("<id {}>", id);
  if (id == eos_id_) return "<eos>";
  return processor_->IdToPiece(id);
}

}  // namespace ustrain
