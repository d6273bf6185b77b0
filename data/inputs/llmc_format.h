// llm.c token shards: a header of 256 little-endian int32 (magic 20240520, version 1, token
// count at [2]) followed by uint16 tokens; the uint32 variant has magic 20240801, version 7.
// llm.c puts the end-of-text token at the START of each document, and its writer lets a
// document continue into the next shard, so the files are read as one stream (in the order
// given; directories sorted) and a new document begins at each occurrence of `eos_id`.
#pragma once

#include <cstdint>
#include <vector>

#include "data/inputs/document_sink.h"
#include "data/inputs/input_files.h"

namespace ustrain {

// UserError naming the file for a bad magic/version, a size that disagrees with the header,
// or ids outside [0, vocab_size).
void read_llmc(const std::vector<InputFile>& files, std::int64_t vocab_size, std::int32_t eos_id, DocumentSink& sink);

}  // namespace ustrain
