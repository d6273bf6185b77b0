// Collects the documents a format reader produces into a dataset directory: tokenizes text
// (data/convert/parallel_encoder.h), appends EOS, assigns each document to train or val, and writes
// both splits' shards. Everything except tokenizing runs on the caller's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/convert/convert.h"
#include "data/inputs/document_sink.h"
#include "data/shards/manifest.h"
#include "data/convert/parallel_encoder.h"
#include "data/files/progress.h"
#include "data/shards/shard_writer.h"

namespace ustrain {

class DatasetBuilder final : public DocumentSink {
 public:
  // Writes shards into `dir`. `tokenizer` encodes text documents (may be null when there are
  // none); `identity` is what the shards and manifest record. `reporter` may be null.
  DatasetBuilder(const ConvertOptions& options, const std::string& dir, const Tokenizer* tokenizer,
                 TokenizerIdentity identity, std::string source, bool append_eos, ProgressReporter* reporter);

  void add_text(std::string text, std::optional<Split> split = std::nullopt, DocumentOrigin origin = {}) override;
  void add_tokens(std::span<const std::int32_t> ids, bool starts, bool ends,
                  std::optional<Split> split = std::nullopt) override;
  void advance(std::int64_t bytes) override;

  // Writes the last shards and returns the manifest describing them (not yet written).
  // UserError if there were no documents or none went to the train split.
  Manifest finish();

  std::int64_t documents() const { return documents_; }
  std::int64_t tokens(Split split) const { return (split == Split::train ? train_ : val_).tokens(); }
  std::int64_t bytes_read() const { return bytes_read_; }
  // Documents whose input did not end with the EOS id (whether or not one was appended); 0
  // when the tokenizer has none.
  std::int64_t documents_without_eos() const { return documents_without_eos_; }

 private:
  void accept(PendingDocument& document);

  ConvertOptions options_;
  TokenizerIdentity identity_;
  std::string source_;
  bool append_eos_;
  ProgressReporter* reporter_;
  ShardWriter train_, val_;
  ParallelEncoder encoder_;
  std::int64_t documents_ = 0;
  std::int64_t bytes_read_ = 0;
  std::int64_t documents_without_eos_ = 0;
  ShardWriter* current_ = nullptr;  // the split of the document being written
  std::int32_t last_id_ = -1;       // its last token so far
};

}  // namespace ustrain
