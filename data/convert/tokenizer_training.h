// `ustrain data tokenizer train`: trains a sentencepiece model (BPE or unigram) on text files
// or JSONL with sentencepiece's own trainer. The defaults make a lossless tokenizer in the
// style of Llama's: no normalisation, digits split, bytes as fallback for unseen characters,
// whitespace kept as it is; ids 0 = <unk>, 1 = </s> (EOS), no BOS or padding.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/inputs/document_splitter.h"

namespace ustrain {

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;    // files or directories
  std::string format;                 // text | jsonl; empty: detected (data/inputs/input_format.h)
  std::string split = "blank-line";   // text: how files divide into documents
  std::string text_field = "text";    // jsonl
  std::int64_t max_document_bytes = kDefaultMaxDocumentBytes;  // a longer document (JSONL line) is refused
  std::vector<std::string> include;   // base-name globs to take; empty: all
  std::vector<std::string> exclude;   // base-name globs to skip
  std::string output;                 // the .model file to write (must not exist; its directory must)
  std::int64_t vocab_size = 8000;
  std::string model_type = "bpe";     // bpe | unigram
  std::int64_t max_sentences = 2'000'000;  // lines sampled for training (deterministically from seed)
  double character_coverage = 0.9995;
  std::uint64_t seed = 1234;
  int threads = 1;
};

struct TokenizerTrainReport {
  std::int64_t lines_read = 0, lines_used = 0, bytes_read = 0;
  std::int64_t vocab_size = 0;
  double seconds = 0;
};

// UserError for bad options, an output that could not be written (checked before training),
// unreadable inputs, a format that cannot be detected or is not text or JSONL, no text, or a
// vocabulary the text cannot fill (sentencepiece's message says the largest possible size).
// Files found in directories that are not text are skipped, as by `data convert`. Messages
// (the detected format, files skipped) go to `progress`. The model file appears only when
// complete.
TokenizerTrainReport train_tokenizer(const TokenizerTrainOptions& options,
                                     const std::function<void(const std::string&)>& progress = {});

}  // namespace ustrain
