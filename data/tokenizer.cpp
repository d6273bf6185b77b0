#include "data/tokenizer.h"

#include <filesystem>

#include <fmt/format.h>

#include "data/byte_tokenizer.h"
#include "data/crc32.h"
#include "data/manifest.h"
#include "data/sentencepiece_tokenizer.h"
#include "kernels/error.h"

namespace ustrain {

std::string TokenizerIdentity::describe() const {
  std::string text = name == kind ? name : fmt::format("{} ({} ids)", name, kind);
  text += fmt::format(" (vocab {}, eos {}", vocab_size, eos_id >= 0 ? std::to_string(eos_id) : "none");
  if (!model_file.empty()) text += fmt::format(", model {} {}", model_file, model_checksum);
  return text + ")";
}

bool names_model_file(const std::string& spec) {
  return spec.ends_with(".model") || (spec != "byte" && std::filesystem::is_regular_file(spec));
}

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  if (names_model_file(spec)) return std::make_unique<SentencePieceTokenizer>(spec);
  throw UserError(fmt::format("tokenizer '{}' is neither 'byte' nor a sentencepiece .model file: pass "
                              "--tokenizer byte or the path of a model (train one with `ustrain data "
                              "tokenizer train`)",
                              spec));
}

std::unique_ptr<Tokenizer> open_dataset_tokenizer(const std::string& dataset_dir) {
  const std::string manifest_path = (std::filesystem::path(dataset_dir) / kManifestFileName).string();
  const TokenizerIdentity identity = read_manifest(manifest_path).tokenizer;
  if (identity.kind == "byte") return std::make_unique<ByteTokenizer>();
  if (identity.kind != "sentencepiece")
    throw UserError(fmt::format("dataset {} holds token ids of the external tokenizer '{}', which ustrain "
                                "cannot load: decode them with that tokenizer's own tools",
                                dataset_dir, identity.name));
  const std::string model = (std::filesystem::path(dataset_dir) / identity.model_file).string();
  if (!std::filesystem::is_regular_file(model))
    throw UserError(fmt::format("dataset {} lacks its tokenizer model {} (listed in {}): re-copy the "
                                "dataset or convert it again",
                                dataset_dir, model, kManifestFileName));
  const std::string checksum = crc32_label(crc32_of_file(model));
  if (checksum != identity.model_checksum)
    throw UserError(fmt::format("tokenizer model {} fails its checksum ({} says {}, the file has {}): "
                                "re-copy the dataset or convert it again",
                                model, kManifestFileName, identity.model_checksum, checksum));
  auto tokenizer = std::make_unique<SentencePieceTokenizer>(model);
  if (tokenizer->vocab_size() != identity.vocab_size)
    throw UserError(fmt::format("tokenizer model {} has {} pieces but {} says vocab_size {}: re-copy the "
                                "dataset or convert it again",
                                model, tokenizer->vocab_size(), kManifestFileName, identity.vocab_size));
  return tokenizer;
}

}  // namespace ustrain
