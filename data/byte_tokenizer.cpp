#include "data/byte_tokenizer.h"

namespace ustrain {

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(static_cast<std::int32_t>(c));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<std::int32_t>& ids, std::string_view eos_text) const {
  std::string out;
  out.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (id >= 0 && id < 256) out.push_back(static_cast<char>(id));
    else if (id == kEos) out.append(eos_text);
  }
  return out;
}

}  // namespace ustrain
