// Token ids read from other tools' files: their integer types, turning raw little-endian
// arrays into checked int32 ids, and sending long documents to a DocumentSink in pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/inputs/document_sink.h"

namespace ustrain {

enum class IdType { u8, i8, u16, i16, u32, i32, u64, i64 };

std::size_t id_type_bytes(IdType type);
const char* id_type_name(IdType type);  // "uint16", ...

// Decodes `count` little-endian elements of `type` into out. UserError naming `file` and the
// element's position (first_position + i) for an id below 0 or not below vocab_size.
void decode_ids(const unsigned char* bytes, std::size_t count, IdType type, std::int64_t vocab_size,
                std::int32_t* out, const std::string& file, std::int64_t first_position);

// Sends one document at a time to a sink in pieces of bounded size, holding the latest piece
// back so that the last one can be flagged as the end. Empty documents are not sent.
class DocumentPieces {
 public:
  explicit DocumentPieces(DocumentSink& sink, std::optional<Split> split = std::nullopt)
      : sink_(sink), split_(split) {}
  void set_split(std::optional<Split> split) { split_ = split; }
  // More ids of the current document (which starts with the first append after an end).
  void append(std::span<const std::int32_t> ids);
  void end_document();

 private:
  static constexpr std::size_t kPieceTokens = 1 << 20;
  DocumentSink& sink_;
  std::optional<Split> split_;
  std::vector<std::int32_t> held_;
  bool started_ = false;  // a piece of the current document went out already
};

}  // namespace ustrain
