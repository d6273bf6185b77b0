#include "core/checkpoint/tokenizer.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "core/checkpoint/fs.h"
#include "core/recipe/recipe_defaults.h"
#include "data/tokenizers/byte_tokenizer.h"
#include "data/files/crc32.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/shards/manifest.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;
namespace {

std::string checksum_of(const std::string& bytes) { return crc32_label(crc32_update(0, bytes.data(), bytes.size())); }

// Whether the kind keeps a model file, and its name in a checkpoint.
bool has_model_file(const std::string& kind) { return kind == "sentencepiece" || kind == "huggingface"; }
const char* checkpoint_file_name(const std::string& kind) {
  return kind == "huggingface" ? kCheckpointTokenizerJson : kCheckpointTokenizerModel;
}

// The first dataset of a recipe, where a checkpoint without a tokenizer of its own finds one.
std::string first_dataset(const DataSection& data) {
  return data.path.empty() && data.blend.empty() ? std::string() : recipe_datasets(data).front().path;
}

TokenizerSnapshot stored_tokenizer(const CheckpointReader& checkpoint, const TokenizerIdentity& identity) {
  TokenizerSnapshot snapshot{identity, {}};
  if (!has_model_file(identity.kind)) return snapshot;
  const std::string path = checkpoint.dir() + "/" + identity.model_file;
  if (!fs::is_regular_file(path))
    throw UserError(fmt::format("checkpoint {} lacks its tokenizer model {} that {} lists: copy the whole checkpoint "
                                "directory, or use an earlier checkpoint",
                                checkpoint.dir(), path, kManifestName));
  snapshot.model = read_text_file(path);
  const std::string checksum = checksum_of(snapshot.model);
  if (checksum != identity.model_checksum)
    throw UserError(fmt::format("{} fails its checksum ({} says {}, the file has {}); the file is damaged: copy the "
                                "checkpoint again, or use an earlier checkpoint",
                                path, kManifestName, identity.model_checksum, checksum));
  return snapshot;
}

// Checkpoints written before they kept their tokenizer: the byte tokenizer needs nothing, a
// sentencepiece model is still in the dataset the recipe names.
TokenizerSnapshot recipe_tokenizer(const CheckpointReader& checkpoint) {
  const std::string manifest = checkpoint.dir() + "/" + kManifestName;
  const Recipe recipe = parse_recipe(checkpoint.manifest().recipe, manifest, {}, RecipeUse::model);
  if (recipe.data.tokenizer == "byte") return byte_tokenizer_snapshot();
  const std::string dataset = first_dataset(recipe.data);
  if (dataset.empty())
    throw UserError(fmt::format("checkpoint {} keeps no tokenizer and its recipe names no dataset to find one in; "
                                "import the model again with `ustrain ckpt import ... --tokenizer byte|FILE.model`",
                                checkpoint.dir()));
  try {
    return dataset_tokenizer_snapshot(recipe.data);
  } catch (const UserError& e) {
    throw UserError(fmt::format("checkpoint {} was written before checkpoints kept their tokenizer, so its "
                                "tokenizer is read from its dataset {} (data.path in its recipe), which failed: {}; "
                                "put the dataset back at {}",
                                checkpoint.dir(), dataset, e.what(), dataset));
  }
}

}  // namespace

TokenizerSnapshot byte_tokenizer_snapshot() {
  const ByteTokenizer byte;
  return {{byte.identity(), byte.identity(), byte.vocab_size(), byte.eos_id(), "", ""}, {}};
}

TokenizerSnapshot model_file_snapshot(const std::string& path, std::optional<std::int64_t> fallback_eos) {
  std::error_code missing;
  if (!fs::exists(path, missing)) throw UserError(fmt::format("tokenizer file {} not found: check the path", path));
  TokenizerSnapshot snapshot;
  snapshot.model = read_text_file(path);  // what is no regular file is refused, naming what it is
  std::unique_ptr<Tokenizer> tokenizer;
  if (path.ends_with(".json")) {
    auto hf = HfTokenizer::from_file(path);
    const bool configured = fs::is_regular_file(fs::path(path).parent_path() / "tokenizer_config.json");
    if (!configured && fallback_eos && *fallback_eos >= 0 && *fallback_eos < hf->vocab_size())
      hf = HfTokenizer::with_eos_id(snapshot.model, path, static_cast<std::int32_t>(*fallback_eos));
    tokenizer = std::move(hf);
  } else {
    tokenizer = SentencePieceTokenizer::from_bytes(snapshot.model, path);
  }
  snapshot.identity = {tokenizer->identity(), tokenizer->identity(), tokenizer->vocab_size(), tokenizer->eos_id(),
                       checkpoint_file_name(tokenizer->identity()), checksum_of(snapshot.model)};
  return snapshot;
}

TokenizerSnapshot dataset_tokenizer_snapshot(const DataSection& data) {
  const std::string dir = first_dataset(data);
  USTRAIN_ASSERT(!dir.empty(), "dataset_tokenizer_snapshot needs data.path or data.blend");
  const TokenizerIdentity identity = read_manifest((fs::path(dir) / kManifestFileName).string()).tokenizer;
  TokenizerSnapshot snapshot{identity, {}};
  if (!has_model_file(identity.kind)) return snapshot;
  const std::string model = (fs::path(dir) / identity.model_file).string();
  if (!fs::is_regular_file(model))
    throw UserError(fmt::format("dataset {} lacks its tokenizer model {} (listed in {}): re-copy the dataset or "
                                "convert it again",
                                dir, model, kManifestFileName));
  snapshot.model = read_text_file(model);
  if (checksum_of(snapshot.model) != identity.model_checksum)
    throw UserError(fmt::format("tokenizer model {} fails its checksum ({} says {}, the file has {}): re-copy the "
                                "dataset or convert it again",
                                model, kManifestFileName, identity.model_checksum, checksum_of(snapshot.model)));
  snapshot.identity.model_file = checkpoint_file_name(identity.kind);
  return snapshot;
}

TokenizerIdentity write_checkpoint_tokenizer(const std::string& dir, const TokenizerSnapshot& tokenizer) {
  TokenizerIdentity identity = tokenizer.identity;
  if (!has_model_file(identity.kind)) return identity;
  USTRAIN_ASSERT(!tokenizer.model.empty(), "a tokenizer without its model file");
  identity.model_file = checkpoint_file_name(identity.kind);
  write_text_file(dir + "/" + identity.model_file, tokenizer.model);
  identity.model_checksum = checksum_of(tokenizer.model);
  return identity;
}

TokenizerSnapshot checkpoint_tokenizer(const CheckpointReader& checkpoint) {
  const auto& stored = checkpoint.manifest().tokenizer;
  return stored ? stored_tokenizer(checkpoint, *stored) : recipe_tokenizer(checkpoint);
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSnapshot& tokenizer, const std::string& where) {
  const TokenizerIdentity& t = tokenizer.identity;
  if (t.kind == "byte") return std::make_unique<ByteTokenizer>();
  if (t.kind == "sentencepiece") return SentencePieceTokenizer::from_bytes(tokenizer.model, where);
  if (t.kind == "huggingface") return HfTokenizer::with_eos_id(tokenizer.model, where, t.eos_id);
  throw UserError(fmt::format("{}: the model's tokenizer ('{}', external ids) is not one ustrain reads, so it cannot "
                              "turn text into ids or back; use that tokenizer's own tools, or give the checkpoint "
                              "one with `ustrain ckpt import ... --tokenizer FILE.model|tokenizer.json`",
                              where, t.name));
}

void check_dataset_tokenizer(const CheckpointReader& checkpoint, const DataSection& data) {
  const auto& stored = checkpoint.manifest().tokenizer;
  // An external tokenizer is only a name people chose: there is nothing exact to compare.
  if (!stored || stored->kind == "external") return;
  for (const BlendEntry& dataset : recipe_datasets(data)) {
    const TokenizerIdentity used =
        read_manifest((fs::path(dataset.path) / kManifestFileName).string()).tokenizer;
    if (!(used == *stored))
      throw UserError(fmt::format("dataset {} was tokenized with {}, but checkpoint {} was trained with {}: its loss "
                                  "there would mean nothing; evaluate on data converted with the checkpoint's "
                                  "tokenizer{}",
                                  dataset.path, used.describe(), checkpoint.dir(), stored->describe(),
                                  has_model_file(stored->kind)
                                      ? fmt::format(" (`ustrain data convert --tokenizer {}/{}`)", checkpoint.dir(),
                                                    stored->model_file)
                                      : ""));
  }
}

}  // namespace ustrain
