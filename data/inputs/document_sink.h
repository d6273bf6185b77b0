// Where a format reader sends the documents it reads (data/convert/dataset_builder.h collects them).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "data/shards/dataset.h"

namespace ustrain {

// Where a text document came from, for a message about it (a tokenizer that cannot split it).
struct DocumentOrigin {
  std::shared_ptr<const std::string> source;  // a file (a dataset split); null: not known
  std::int64_t number = 0;                    // the document's number in it, from 1; 0: a JSONL line
  std::int64_t line = 0;                      // its first line; 0: not known

  // "a.txt: document 3 (from line 12)", "a.jsonl:7", "DIR (train split): document 5"; "" when not known.
  std::string describe() const {
    if (!source) return "";
    if (number == 0) return *source + ":" + std::to_string(line);
    return *source + ": document " + std::to_string(number) +
           (line > 0 ? " (from line " + std::to_string(line) + ")" : "");
  }
};

class DocumentSink {
 public:
  virtual ~DocumentSink() = default;
  // One whole document of text, to be tokenized. `split` forces its split (else it is drawn).
  virtual void add_text(std::string text, std::optional<Split> split = std::nullopt, DocumentOrigin origin = {}) = 0;
  // Token ids of a document, possibly in pieces: `starts` marks the first, `ends` the last.
  // Pieces are not empty; ids are already checked against the vocabulary.
  virtual void add_tokens(std::span<const std::int32_t> ids, bool starts, bool ends,
                          std::optional<Split> split = std::nullopt) = 0;
  // Input bytes consumed since the last call, for the progress line.
  virtual void advance(std::int64_t bytes) = 0;
};

}  // namespace ustrain
