// Megatron-LM indexed datasets: PREFIX.bin holds the raw tokens; PREFIX.idx (little-endian) is
// the magic "MMIDIDX\0\0", u64 version 1, u8 dtype code (1 u8, 2 i8, 3 i16, 4 i32, 5 i64,
// 6 f64, 7 f32, 8 u16), u64 sequence count S, u64 document count D, int32[S] sequence lengths
// in tokens, int64[S] byte offsets of the sequences in .bin, int64[D] document indices (the
// sequence where each document starts, 0 first, S last; D = documents + 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/inputs/document_sink.h"
#include "data/inputs/input_files.h"

namespace ustrain {

// Each input is a prefix, a .idx or .bin path, or a directory (every *.idx below it, sorted).
// Returns the prefixes; UserError for an input that names no dataset.
std::vector<std::string> megatron_prefixes(const std::vector<std::string>& inputs, const NameFilter& filter);

// Total size of the .bin files, for progress.
std::int64_t megatron_bytes(const std::vector<std::string>& prefixes);

// Each document (its sequences joined) goes to the sink; empty ones are skipped. UserError
// naming the file for a bad magic, version or dtype, a truncated file, offsets outside .bin,
// or ids outside [0, vocab_size).
void read_megatron(const std::vector<std::string>& prefixes, std::int64_t vocab_size, DocumentSink& sink);

}  // namespace ustrain
