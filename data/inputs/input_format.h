// Which format a conversion or tokenizer training reads when --format is not given: told from
// file extensions and from the magic numbers the token formats start with, so that a JSONL
// file is never read as plain text just because nobody said otherwise.
#pragma once

#include <string>
#include <vector>

#include "data/inputs/input_files.h"

namespace ustrain {

struct DetectedFormat {
  std::string format;  // text | jsonl | megatron | llmc | npy | shards
  std::string reason;  // why, for one line on stderr, e.g. "corpus.jsonl ends in .jsonl"
};

// Per input: a directory holding manifest.json is our dataset (shards); another directory
// takes the format of the token or JSONL files in it (*.jsonl, *.npy, llm.c *.bin, Megatron
// *.idx), or text when it holds none of them; a file is told by its magic (Megatron's
// MMIDIDX, NumPy's \x93NUMPY, llm.c's header), then its extension (.jsonl/.json/.ndjson,
// .npy, .txt/.md/...), then its content (text whose first line is a JSON object is JSONL,
// other text is text). UserError naming the input and suggesting --format when its format
// cannot be told, or when inputs (or the files of one directory) are of different formats.
DetectedFormat detect_input_format(const std::vector<std::string>& inputs, const NameFilter& filter);

}  // namespace ustrain
