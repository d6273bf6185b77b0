// The tokenizer a checkpoint keeps (format: core/checkpoint/format.h), so that sampling,
// evaluation and export need neither the dataset nor the recipe's data.path: its identity in
// the manifest and, for sentencepiece and Hugging Face tokenizers, the model file beside the
// rank files.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/checkpoint/reader.h"
#include "core/recipe/recipe.h"
#include "data/tokenizers/tokenizer.h"

namespace ustrain {

// A tokenizer as a checkpoint keeps it.
struct TokenizerSnapshot {
  TokenizerIdentity identity;  // model_file: kCheckpointTokenizerModel or kCheckpointTokenizerJson
  std::string model;           // the .model or tokenizer.json file's bytes; empty for byte and external
};

TokenizerSnapshot byte_tokenizer_snapshot();
// A sentencepiece .model file or a Hugging Face tokenizer.json (its EOS from the
// tokenizer_config.json beside it, else `fallback_eos` when that is a token id, else a
// conventional end-of-text token), checked by loading it. UserError naming `path`.
TokenizerSnapshot model_file_snapshot(const std::string& path, std::optional<std::int64_t> fallback_eos = {});
// The tokenizer of the dataset a recipe trains on (the first of a blend: blended datasets
// share one), its model checked against the dataset's checksum. UserError naming the dataset.
TokenizerSnapshot dataset_tokenizer_snapshot(const DataSection& data);

// Writes the sentencepiece model or tokenizer.json (if any) into the checkpoint directory `dir`, fsynced, and
// returns the identity for the manifest.
TokenizerIdentity write_checkpoint_tokenizer(const std::string& dir, const TokenizerSnapshot& tokenizer);

// The checkpoint's tokenizer: the one it keeps, its model checked against the manifest's
// checksum; for a checkpoint written before checkpoints kept one, the byte tokenizer or its
// dataset's, as its recipe says. UserError saying what is missing or damaged and what to do.
TokenizerSnapshot checkpoint_tokenizer(const CheckpointReader& checkpoint);

// A tokenizer to encode and decode with; `where` names its origin in messages. UserError for
// external ids, which ustrain cannot decode.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSnapshot& tokenizer, const std::string& where);

// UserError when a dataset of `data` was tokenized otherwise than the checkpoint's model was
// trained (evaluating there would measure nothing). Nothing is checked for a checkpoint that
// keeps no tokenizer or an external one (only a name).
void check_dataset_tokenizer(const CheckpointReader& checkpoint, const DataSection& data);

}  // namespace ustrain
