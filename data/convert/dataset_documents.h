// The documents of existing datasets as conversion input (`--format shards`): each stays in
// its split. Re-sharding copies the ids; re-tokenizing decodes each document with the
// dataset's own tokenizer (dropping its EOS) and hands the text on to be encoded again.
#pragma once

#include <string>
#include <vector>

#include "data/shards/dataset.h"
#include "data/inputs/document_sink.h"
#include "data/tokenizers/tokenizer.h"

namespace ustrain {

// `decode_with`: null to re-shard, else the datasets' tokenizer for re-tokenizing. Each shard
// is verified (checksum, attributes, ids) before it is used.
void read_dataset_documents(const std::vector<TokenDataset>& datasets, const Tokenizer* decode_with,
                            DocumentSink& sink);

}  // namespace ustrain
