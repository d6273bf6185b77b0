#include "core/tensorboard/tfrecord.h"

#include "core/tensorboard/crc32c.h"

namespace ustrain {
namespace {

// Fixed-width little-endian, whatever the host's byte order.
void append_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

std::uint32_t tfrecord_masked_crc(std::string_view bytes) {
  const std::uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  append_le(record, data.size(), 8);
  append_le(record, tfrecord_masked_crc(record), 4);
  record.append(data);
  append_le(record, tfrecord_masked_crc(data), 4);
  return record;
}

}  // namespace ustrain
