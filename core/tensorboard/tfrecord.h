// TFRecord framing, the container of TensorBoard event files. Each record is
//   length   u64, little-endian
//   u32      masked CRC-32C of the 8 length bytes
//   data     `length` bytes
//   u32      masked CRC-32C of the data
// with the CRCs little-endian too. A reader checks the length's CRC before trusting the
// length, so a torn or corrupt file is detected rather than misread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ustrain {

// ((crc >> 15) | (crc << 17)) + 0xa282ead8 of the CRC-32C of `bytes`. Storing a plain CRC
// after its data would make the CRC of the two together the same constant for any data, which
// weakens any checksum later taken over the file's bytes; the rotation and offset avoid that.
std::uint32_t tfrecord_masked_crc(std::string_view bytes);

// The framed record holding `data`.
std::string tfrecord_frame(std::string_view data);

}  // namespace ustrain
