#include "data/tokenizers/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : model_path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::error_code missing;
  if (!std::filesystem::exists(model_path, missing))
    throw UserError(fmt::format("sentencepiece model {} not found: check the path, or train one with "
                                "`ustrain data tokenizer train`",
                                model_path));
  ::close(open_regular_file(model_path).fd);  // a FIFO, directory or device: refused, naming what it is
  const auto status = processor_->Load(model_path);
  load_status(model_path, status.ok(), status.ToString());
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_bytes(const std::string& model,
                                                                           const std::string& label) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->model_path_ = label;
  t->processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = t->processor_->LoadFromSerializedProto(absl::string_view(model.data(), model.size()));
  t->load_status(label, status.ok(), status.ToString());
  return t;
}

void SentencePieceTokenizer::load_status(const std::string& what, bool ok, const std::string& status) {
  if (!ok)
    throw UserError(fmt::format("{} is not a readable sentencepiece model ({}): pass a .model file "
                                "written by sentencepiece or `ustrain data tokenizer train`",
                                what, status));
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

std::int32_t SentencePieceTokenizer::unk_id() const { return processor_->unk_id(); }
std::int32_t SentencePieceTokenizer::bos_id() const { return processor_->bos_id(); }
std::int32_t SentencePieceTokenizer::pad_id() const { return processor_->pad_id(); }

std::string SentencePieceTokenizer::raw_piece(std::int32_t id) const {
  USTRAIN_ASSERT(id >= 0 && id < vocab_size_, "piece id " + std::to_string(id) + " outside the vocabulary");
  return processor_->IdToPiece(id);
}

bool SentencePieceTokenizer::adds_dummy_prefix() const {
  // The C++ API does not expose the normalizer's settings; its effect shows in any encoding.
  std::vector<std::string> pieces;
  if (!processor_->Encode("a", &pieces).ok() || pieces.empty()) return false;
  return pieces.front().starts_with("\xE2\x96\x81");  // U+2581, sentencepiece's space
}

}  // namespace ustrain
