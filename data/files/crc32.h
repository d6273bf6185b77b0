// CRC-32 (the IEEE 802.3 / zlib polynomial) of bytes and of whole files, used as the shard
// checksum in manifest.json. The standard variant lets anyone verify a shard with common tools,
// e.g. Python's zlib.crc32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ustrain {

// Continues a CRC-32 over `size` more bytes; start with crc = 0.
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t size);

// CRC-32 of a whole file; UserError naming the file if it cannot be read.
std::uint32_t crc32_of_file(const std::string& path);

// The manifest spelling of a checksum: "crc32:" followed by 8 lowercase hex digits.
std::string crc32_label(std::uint32_t crc);

}  // namespace ustrain
