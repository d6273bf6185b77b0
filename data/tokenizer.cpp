#include "data/tokenizer.h"

#include <filesystem>

#include <fmt/format.h>

#include "data/byte_tokenizer.h"
#include "data/crc32.h"
#include "data/hf_tokenizer.h"
#include "data/manifest.h"
#include "data/regular_file.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tiktoken_file.h"
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

std::unique_ptr<Tokenizer> open_dataset_tokenizer(const std::string& dataset_dir) {
  const std::string manifest_path = (fs::path(dataset_dir) / kManifestFileName).string();
  const TokenizerIdentity identity = read_manifest(manifest_path).tokenizer;
  if (identity.kind == "byte") return std::make_unique<ByteTokenizer>();
  if (identity.kind != "sentencepiece" && identity.kind != "huggingface")
    throw UserError(fmt::format("dataset {} holds token ids of the external tokenizer '{}', which ustrain "
                                "cannot load: decode them with that tokenizer's own tools",
                                dataset_dir, abbreviate(identity.name)));
  const std::string model = (fs::path(dataset_dir) / identity.model_file).string();
  if (!fs::is_regular_file(model))
    throw UserError(fmt::format("dataset {} lacks its tokenizer model {} (listed in {}): re-copy the "
                                "dataset or convert it again",
                                dataset_dir, model, kManifestFileName));
  const std::string checksum = crc32_label(crc32_of_file(model));
  if (checksum != identity.model_checksum)
    throw UserError(fmt::format("tokenizer model {} fails its checksum ({} says {}, the file has {}): "
                                "re-copy the dataset or convert it again",
                                model, kManifestFileName, identity.model_checksum, checksum));
  std::unique_ptr<Tokenizer> tokenizer;
  if (identity.kind == "sentencepiece") {
    tokenizer = std::make_unique<SentencePieceTokenizer>(model);
  } else {
    tokenizer = HfTokenizer::with_eos_id(read_regular_file(model), model, identity.eos_id);
  }
  if (tokenizer->vocab_size() != identity.vocab_size)
    throw UserError(fmt::format("tokenizer model {} has {} pieces but {} says vocab_size {}: re-copy the "
                                "dataset or convert it again",
                                model, tokenizer->vocab_size(), kManifestFileName, identity.vocab_size));
  return tokenizer;
}

}  // namespace ustrain
