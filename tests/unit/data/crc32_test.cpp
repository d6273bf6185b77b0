// CRC-32 against the published check value and against itself in pieces.
#include <gtest/gtest.h>

#include <string>

#include "data/files/crc32.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

TEST(DataCrc32, MatchesTheStandardCheckValue) {
  // The catalogued check value of CRC-32/ISO-HDLC (zlib's crc32) for "123456789".
  const std::string check = "123456789";
  EXPECT_EQ(crc32_update(0, check.data(), check.size()), 0xCBF43926u);
  EXPECT_EQ(crc32_update(0, nullptr, 0), 0u);
  EXPECT_EQ(crc32_label(0xCBF43926u), "crc32:cbf43926");
  EXPECT_EQ(crc32_label(0x1u), "crc32:00000001");
}

TEST(DataCrc32, PiecewiseEqualsWholeForEverySplitPoint) {
  std::string data;
  for (int i = 0; i < 61; ++i) data.push_back(static_cast<char>((i * 37 + 11) & 0xFF));
  const std::uint32_t whole = crc32_update(0, data.data(), data.size());
  for (std::size_t cut = 0; cut <= data.size(); ++cut) {
    const std::uint32_t first = crc32_update(0, data.data(), cut);
    EXPECT_EQ(crc32_update(first, data.data() + cut, data.size() - cut), whole) << "cut " << cut;
  }
}

TEST(DataCrc32, FileChecksumEqualsChecksumOfItsBytes) {
  test::ScratchDir scratch;
  std::string content(3 * 1000 * 1000 + 7, '\0');  // spans several read buffers
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 2654435761u) >> 13);
  test::write_file(scratch / "blob", content);
  EXPECT_EQ(crc32_of_file(scratch / "blob"), crc32_update(0, content.data(), content.size()));
  test::expect_user_error([&] { crc32_of_file(scratch / "absent"); }, {scratch / "absent"});
}

}  // namespace
}  // namespace ustrain
