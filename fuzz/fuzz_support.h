// What the fuzz targets share: a scratch directory of this process (on a memory filesystem
// when there is one) for the readers that take a path, and a document sink that drops what
// it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "data/inputs/document_sink.h"

namespace ustrain::fuzz {

// A directory only this process uses, created on first use.
const std::string& scratch_dir();
// Writes `size` bytes to scratch_dir()/name and returns the path.
std::string write_scratch(const std::string& name, const std::uint8_t* data, std::size_t size);

class NullSink final : public DocumentSink {
 public:
  void add_text(std::string, std::optional<Split>, DocumentOrigin) override {}
  void add_tokens(std::span<const std::int32_t>, bool, bool, std::optional<Split>) override {}
  void advance(std::int64_t) override {}
};

}  // namespace ustrain::fuzz
