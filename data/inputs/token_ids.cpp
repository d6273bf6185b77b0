#include "data/inputs/token_ids.h"

#include <type_traits>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

template <class T>
void decode_as(const unsigned char* bytes, std::size_t count, std::int64_t vocab_size, std::int32_t* out,
               const std::string& file, std::int64_t first_position) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t raw = 0;
    for (std::size_t b = 0; b < sizeof(T); ++b)  // little-endian on any host
      raw |= static_cast<std::uint64_t>(bytes[i * sizeof(T) + b]) << (8 * b);
    const T value = static_cast<T>(raw);
    bool negative = false;
    if constexpr (std::is_signed_v<T>) negative = value < 0;
    if (negative || static_cast<std::uint64_t>(value) >= static_cast<std::uint64_t>(vocab_size))
      throw UserError(fmt::format("{} holds token id {} at position {}, outside the vocabulary of size {}: pass "
                                  "the --tokenizer and --vocab-size that made these ids",
                                  file, static_cast<std::int64_t>(value), first_position + static_cast<std::int64_t>(i),
                                  vocab_size));
    out[i] = static_cast<std::int32_t>(value);
  }
}

}  // namespace

std::size_t id_type_bytes(IdType type) {
  switch (type) {
    case IdType::u8: case IdType::i8: return 1;
    case IdType::u16: case IdType::i16: return 2;
    case IdType::u32: case IdType::i32: return 4;
    case IdType::u64: case IdType::i64: return 8;
  }
  return 0;
}

const char* id_type_name(IdType type) {
  switch (type) {
    case IdType::u8: return "uint8";
    case IdType::i8: return "int8";
    case IdType::u16: return "uint16";
    case IdType::i16: return "int16";
    case IdType::u32: return "uint32";
    case IdType::i32: return "int32";
    case IdType::u64: return "uint64";
    case IdType::i64: return "int64";
  }
  return "?";
}

void decode_ids(const unsigned char* bytes, std::size_t count, IdType type, std::int64_t vocab_size,
                std::int32_t* out, const std::string& file, std::int64_t first_position) {
  switch (type) {
    case IdType::u8: return decode_as<std::uint8_t>(bytes, count, vocab_size, out, file, first_position);
    case IdType::i8: return decode_as<std::int8_t>(bytes, count, vocab_size, out, file, first_position);
    case IdType::u16: return decode_as<std::uint16_t>(bytes, count, vocab_size, out, file, first_position);
    case IdType::i16: return decode_as<std::int16_t>(bytes, count, vocab_size, out, file, first_position);
    case IdType::u32: return decode_as<std::uint32_t>(bytes, count, vocab_size, out, file, first_position);
    case IdType::i32: return decode_as<std::int32_t>(bytes, count, vocab_size, out, file, first_position);
    case IdType::u64: return decode_as<std::uint64_t>(bytes, count, vocab_size, out, file, first_position);
    case IdType::i64: return decode_as<std::int64_t>(bytes, count, vocab_size, out, file, first_position);
  }
}

void DocumentPieces::append(std::span<const std::int32_t> ids) {
  if (ids.empty()) return;
  if (!held_.empty() && held_.size() + ids.size() > kPieceTokens) {
    sink_.add_tokens(held_, !started_, /*ends=*/false, split_);
    started_ = true;
    held_.clear();
  }
  held_.insert(held_.end(), ids.begin(), ids.end());
}

void DocumentPieces::end_document() {
  if (!held_.empty()) sink_.add_tokens(held_, !started_, /*ends=*/true, split_);
  held_.clear();
  started_ = false;
}

}  // namespace ustrain
