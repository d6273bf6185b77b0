#include "data/tokenizers/tokenizer.h"

#include <filesystem>

#include <fmt/format.h>

#include "data/tokenizers/byte_tokenizer.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "data/tokenizers/tiktoken_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

std::string TokenizerIdentity::describe() const {
  std::string text = name == kind ? name : fmt::format("{} ({} ids)", name, kind);
  text += fmt::format(" (vocab {}, eos {}", vocab_size, eos_id >= 0 ? std::to_string(eos_id) : "none");
  if (!model_file.empty()) text += fmt::format(", model {} {}", model_file, model_checksum);
  return text + ")";
}

bool names_model_file(const std::string& spec) {
  return spec.ends_with(".model") || spec.ends_with(".json") || spec.ends_with(".tiktoken") ||
         (spec != "byte" && fs::is_regular_file(spec));
}

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& spec, const TokenizerOptions& options) {
  const bool tiktoken = spec.ends_with(".tiktoken");
  if (!tiktoken && (!options.tiktoken_pattern.empty() || !options.tiktoken_special_tokens.empty()))
    throw UserError(fmt::format("--tiktoken-pattern and --tiktoken-special apply to tiktoken rank files (*.tiktoken), "
                                "not to tokenizer '{}'",
                                spec));
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  if (spec.ends_with(".json")) return HfTokenizer::from_file(spec);
  if (tiktoken) {
    const TiktokenOptions tiktoken_options{options.tiktoken_pattern, options.tiktoken_special_tokens};
    return std::make_unique<HfTokenizer>(tiktoken_to_tokenizer_json(spec, tiktoken_options), spec);
  }
  if (names_model_file(spec)) return std::make_unique<SentencePieceTokenizer>(spec);
  throw UserError(fmt::format("tokenizer '{}' is neither 'byte' nor a tokenizer file: pass --tokenizer byte, a "
                              "sentencepiece .model (train one with `ustrain data tokenizer train`), a Hugging Face "
                              "tokenizer.json or a tiktoken .tiktoken file",
                              abbreviate(spec)));
}

std::string stored_tokenizer_json(const Tokenizer& tokenizer) {
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer);
  return hf ? hf->json() : std::string();
}


}  // namespace ustrain
