// Converts plain text files into a token dataset (HDF5 shards + manifest.json, see
// data/README.md) with the byte tokenizer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ustrain {

struct TextConvertOptions {
  std::vector<std::string> inputs;        // files or directories (recursed, sorted order)
  std::string output_dir;
  std::string split = "blank-line";       // "file" | "blank-line" | "line:<MARKER>" (a line equal to
                                          // MARKER separates documents, e.g. "line:%" for fortune files)
  double val_fraction = 0.05;             // share of DOCUMENTS held out for validation (deterministic from seed)
  std::uint64_t seed = 1234;
  bool eos = true;                        // append EOS after each document
  std::int64_t shard_tokens = 1 << 26;    // max tokens per shard file
  std::vector<std::string> exclude;       // basename globs to skip (fnmatch), e.g. "*.dat"
};

struct ConvertReport {
  std::int64_t documents = 0, train_tokens = 0, val_tokens = 0, bytes_read = 0;
  double seconds = 0;
  int shards = 0;
};

// Tokenizes with the byte tokenizer and writes HDF5 shards + manifest. Progress lines go to the
// callback (may be empty). Writes into a temporary sibling directory and renames it into place
// only when complete, so an interrupted conversion never leaves a dataset that looks complete;
// refuses to overwrite an existing non-empty output_dir (UserError with advice). No input files /
// no documents -> UserError. Empty documents (only whitespace) are dropped.
//
// Document d (counting from 0 over all files in order) goes to validation when
// SplitMix64(SplitMix64::derive(seed, d)).unit() < val_fraction (data/portable_random.h), so the
// split needs no second pass and is the same on every machine.
ConvertReport convert_text(const TextConvertOptions& options,
                           const std::function<void(const std::string&)>& progress = {});

}  // namespace ustrain
