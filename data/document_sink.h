// Where a format reader sends the documents it reads (data/dataset_builder.h collects them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "data/dataset.h"

namespace ustrain {

class DocumentSink {
 public:
  virtual ~DocumentSink() = default;
  // One whole document of text, to be tokenized. `split` forces its split (else it is drawn).
  virtual void add_text(std::string text, std::optional<Split> split = std::nullopt) = 0;
  // Token ids of a document, possibly in pieces: `starts` marks the first, `ends` the last.
  // Pieces are not empty; ids are already checked against the vocabulary.
  virtual void add_tokens(std::span<const std::int32_t> ids, bool starts, bool ends,
                          std::optional<Split> split = std::nullopt) = 0;
  // Input bytes consumed since the last call, for the progress line.
  virtual void advance(std::int64_t bytes) = 0;
};

}  // namespace ustrain
