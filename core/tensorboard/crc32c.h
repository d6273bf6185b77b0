// CRC-32C (the Castagnoli polynomial), the checksum TFRecord framing uses. None of ustrain's
// dependencies offers this variant (data/files/crc32.h computes the IEEE polynomial of zlib).
#pragma once

#include <cstdint>
#include <string_view>

namespace ustrain {

// CRC-32C of `bytes` (initial value and final xor 0xFFFFFFFF, bits reflected):
// crc32c("123456789") = 0xE3069283.
std::uint32_t crc32c(std::string_view bytes);

}  // namespace ustrain
