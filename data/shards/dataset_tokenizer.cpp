#include "data/shards/dataset_tokenizer.h"

#include <fmt/format.h>

#include <filesystem>

#include "data/tokenizers/byte_tokenizer.h"
#include "data/files/crc32.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/shards/manifest.h"
#include "data/files/regular_file.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "kernels/error.h"

namespace ustrain {

namespace fs = std::filesystem;

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
