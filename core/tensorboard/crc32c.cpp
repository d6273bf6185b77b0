#include "core/tensorboard/crc32c.h"

#include <array>

namespace ustrain {
namespace {

// One table, one byte per step: event records are small and written once per training step,
// so the slice-by-8 speed-up of data/files/crc32.cpp would buy nothing here.
constexpr std::array<std::uint32_t, 256> make_table() {
  constexpr std::uint32_t kReflectedPolynomial = 0x82F63B78u;
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ kReflectedPolynomial : c >> 1;
    t[b] = c;
  }
  return t;
}

constexpr std::array<std::uint32_t, 256> kTable = make_table();

}  // namespace

std::uint32_t crc32c(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char ch : bytes) crc = (crc >> 8) ^ kTable[(crc ^ static_cast<unsigned char>(ch)) & 0xFF];
  return ~crc;
}

}  // namespace ustrain
