#include "data/tokenizers/byte_tokenizer.h"

#include <fmt/format.h>

namespace ustrain {

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (std::int32_t id : ids)
    if (id >= 0 && id < 256) out.push_back(static_cast<char>(id));
  return out;
}

std::string ByteTokenizer::piece(std::int32_t id) const {
  if (id == kEos) return "<eos>";
  if (id >= 0x21 && id < 0x7F) return std::string(1, static_cast<char>(id));
  if (id == ' ') return "' '";
  return fmt::format("<0x{:02X}>", id);
}

}  // namespace ustrain
