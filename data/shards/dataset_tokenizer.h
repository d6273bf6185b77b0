// The tokenizer a dataset directory names in its manifest (data/shards/manifest.h): checked against
// the manifest's checksum and vocabulary size before anything is decoded with it.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizers/tokenizer.h"

namespace ustrain {

// The tokenizer of a dataset directory: byte, or the sentencepiece model or tokenizer.json
// stored in it (its checksum verified). UserError naming the dataset when it holds external
// ids, whose tokenizer ustrain does not have, or when the model file is missing or damaged.
std::unique_ptr<Tokenizer> open_dataset_tokenizer(const std::string& dataset_dir);

}  // namespace ustrain
