// `ustrain data convert`: text, JSONL, Megatron indexed datasets, llm.c shards, NumPy token
// arrays or our own datasets -> a dataset directory of HDF5 shards + manifest.json (format in
// data/README.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "data/inputs/document_splitter.h"

namespace ustrain {

// What ends each document: kept as the input has it, or EOS appended unless already there.
// automatic: append for text formats (text, jsonl, re-tokenized shards), none for token ids
// (a Megatron conversion whose documents lack the tokenizer's EOS then says so).
enum class EosMode { automatic, append, none };

struct ConvertOptions {
  std::string format;                    // text | jsonl | megatron | llmc | npy | shards; empty:
                                         // detected from the inputs (data/inputs/input_format.h)
  std::vector<std::string> inputs;       // files or directories (recursed, sorted order)
  std::string output_dir;
  // text, jsonl: "byte", a sentencepiece .model, a tokenizer.json or a .tiktoken file
  // (default byte). Token formats: one of those, or the name of the tokenizer that made the
  // ids (e.g. gpt2, with vocab_size). shards: empty or the input's tokenizer re-shards;
  // another one re-tokenizes.
  std::string tokenizer;
  std::string tiktoken_pattern;                    // .tiktoken: a known encoding or a regex
  std::vector<std::string> tiktoken_special_tokens;  // .tiktoken: "TOKEN=ID"
  std::int64_t vocab_size = 0;           // token formats with a named tokenizer: ids lie below it
  // The end-of-document token by id or by name (data/convert/document_eos.h); a Hugging Face
  // tokenizer then ends documents with it, other tokenizer files must agree. Token formats
  // with a named tokenizer: the id that splits llm.c and NumPy streams (llmc: 50256 when -1).
  std::int64_t eos_id = -1;
  std::string eos_token;
  std::string split = "blank-line";      // text: "file" | "blank-line" | "line:<MARKER>"
  std::vector<std::string> include;      // base-name globs to take (fnmatch), e.g. "*.txt"; empty: all
  std::vector<std::string> exclude;      // base-name globs to skip, e.g. "*.dat"
  std::string text_field = "text";       // jsonl: the field holding each document's text
  // text, jsonl: a longer document (JSONL line) is refused, naming it (data/inputs/document_splitter.h)
  std::int64_t max_document_bytes = kDefaultMaxDocumentBytes;
  EosMode eos = EosMode::automatic;
  double val_fraction = 0.05;            // share of DOCUMENTS held out (shards: splits are kept)
  std::uint64_t seed = 1234;
  std::int64_t shard_tokens = 1 << 26;   // max tokens per shard file
  int compression = 0;                   // 0 none, 1-9 deflate level
  int workers = 1;                       // tokenizing threads
};

struct ConvertReport {
  std::int64_t documents = 0, train_tokens = 0, val_tokens = 0, bytes_read = 0;
  double seconds = 0;
  int shards = 0;
  std::string format;     // the input format, as given or detected
  std::string tokenizer;  // its description
};

// Writes into a temporary sibling directory and renames it into place only when complete, so
// an interrupted conversion never leaves a dataset that looks complete; refuses to overwrite
// an existing non-empty output_dir; removes the temporary directories of earlier conversions
// into the same output that were killed. UserError naming the input file (and position) for
// any bad input: unreadable, truncated, not the format, ids outside the vocabulary, no
// documents, a format that cannot be detected. Text files found in directories are skipped
// when they are not text (data/inputs/text_check.h). Messages (the detected format, files skipped,
// temporary directories removed, notes) go to `messages` (may be empty); so does the progress line every few seconds, unless
// `progress_bar` names a stream for it (a terminal gets one line rewritten in place). The
// summary is the returned report, for the caller to print.
//
// Document d (counting from 0 over all inputs in order) goes to validation when
// SplitMix64(SplitMix64::derive(seed, d)).unit() < val_fraction (data/files/portable_random.h), so
// the split needs no second pass and is the same on every machine. The result does not
// depend on `workers`.
ConvertReport convert_dataset(const ConvertOptions& options,
                              const std::function<void(const std::string&)>& messages = {},
                              std::FILE* progress_bar = nullptr);

}  // namespace ustrain
