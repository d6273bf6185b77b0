// The safetensors format: float conversions against hand-computed bit patterns, the header
// layout read back by a parser written here from the specification, and every way a damaged
// file must be refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/safetensors_dtype.h"
#include "core/checkpoint/safetensors_file.h"
#include "kernels/error.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808000)), 0x3F80);  // halfway, even neighbour below
  EXPECT_EQ(float_to_bf16(from_bits(0x3F818000)), 0x3F82);  // halfway, even neighbour above
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808001)), 0x3F81);  // just above halfway
  EXPECT_EQ(float_to_bf16(from_bits(0x3F807FFF)), 0x3F80);  // just below halfway
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7FFFFF)), 0x7F80);  // the largest float rounds to infinity
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16(from_bits(0x00000001)), 0x0000);  // the smallest subnormal rounds to zero
  const std::uint16_t nan = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  // A NaN whose payload lies only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7F800001)))));
}

TEST(Bf16, WidensExactly) {
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_float(0xFF80), -std::numeric_limits<float>::infinity());
}

TEST(F16, WidensEveryClass) {
  EXPECT_EQ(f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_float(0xC000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);                     // largest finite
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14));        // smallest normal
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));        // smallest subnormal
  EXPECT_EQ(f16_to_float(0x03FF), 1023.0f * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);  // 2^-2 * (1 + 341/1024)
  EXPECT_EQ(f16_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
  EXPECT_EQ(f16_to_float(0x8000), 0.0f);
}

// A parser written from the specification, independent of decode_safetensors_header.
struct ParsedFile {
  std::uint64_t header_length = 0;
  nlohmann::json header;
  std::string data;
};

ParsedFile parse_by_hand(const std::string& bytes) {
  ParsedFile p;
  for (int i = 7; i >= 0; --i) p.header_length = (p.header_length << 8) | static_cast<unsigned char>(bytes[i]);
  p.header = nlohmann::json::parse(bytes.substr(8, p.header_length));
  p.data = bytes.substr(8 + p.header_length);
  return p;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ustrain_st_" + std::to_string(::getpid()) +
                                        "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes a file with a 2x3 F32 tensor "a" and a 3-element BF16 tensor "b".
  std::string write_sample(const std::string& name) {
    std::vector<SafetensorsEntry> entries = {{"a", "F32", {2, 3}, 0, 0}, {"b", "BF16", {3}, 0, 0}};
    EXPECT_EQ(lay_out_entries(entries), 24u + 6u);
    SafetensorsWriter w(path(name), entries, {{"format", "pt"}});
    const float a[6] = {1, -2, 3.5f, 0.25f, -0.0f, 1e-3f};
    const std::uint16_t b[3] = {0x3F80, 0x4049, 0xC000};
    w.write(a, sizeof a);
    w.write(b, sizeof b);
    w.finish();
    return path(name);
  }

  fs::path dir_;
};

TEST_F(SafetensorsFileTest, HeaderFollowsTheSpecification) {
  const std::string bytes = slurp(write_sample("x.safetensors"));
  const ParsedFile p = parse_by_hand(bytes);
  EXPECT_EQ((8 + p.header_length) % 8, 0u) << "data must start 8-byte aligned";
  EXPECT_EQ(p.header["__metadata__"]["format"], "pt");
  EXPECT_EQ(p.header["a"]["dtype"], "F32");
  EXPECT_EQ(p.header["a"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(p.header["a"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(p.header["b"]["dtype"], "BF16");
  EXPECT_EQ(p.header["b"]["data_offsets"], nlohmann::json({24, 30}));
  ASSERT_EQ(p.data.size(), 30u);
  float a1;
  std::memcpy(&a1, p.data.data() + 4, 4);
  EXPECT_EQ(a1, -2.0f);
  EXPECT_EQ(static_cast<unsigned char>(p.data[26]), 0x49);  // little-endian 0x4049
  EXPECT_EQ(static_cast<unsigned char>(p.data[27]), 0x40);
}

TEST_F(SafetensorsFileTest, ReaderConvertsToFloat32) {
  const SafetensorsReader r(write_sample("x.safetensors"));
  ASSERT_EQ(r.header().entries.size(), 2u);
  EXPECT_EQ(r.header().metadata.at("format"), "pt");
  std::vector<float> a(6), b(3);
  r.read_f32(*r.header().find("a"), a.data());
  r.read_f32(*r.header().find("b"), b.data());
  EXPECT_EQ(a, (std::vector<float>{1, -2, 3.5f, 0.25f, -0.0f, 1e-3f}));
  EXPECT_EQ(b, (std::vector<float>{1.0f, 3.140625f, -2.0f}));
}

TEST_F(SafetensorsFileTest, TruncatedFileIsRefusedNamingIt) {
  const std::string file = write_sample("x.safetensors");
  fs::resize_file(file, fs::file_size(file) - 1);
  try {
    SafetensorsReader r(file);
    FAIL() << "a truncated file was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  fs::resize_file(file, 20);  // the header itself is cut
  EXPECT_THROW(SafetensorsReader{file}, UserError);
  fs::resize_file(file, 3);   // not even the length prefix
  EXPECT_THROW(SafetensorsReader{file}, UserError);
}

// Writes a file made of an arbitrary header text and `data_bytes` zero bytes.
std::string write_raw(const std::string& file, const std::string& json, std::size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  bytes += json + std::string(data_bytes, '\0');
  std::ofstream(file, std::ios::binary) << bytes;
  return file;
}

TEST_F(SafetensorsFileTest, MalformedHeadersAreRefused) {
  const auto refused = [&](const std::string& json, std::size_t data) {
    EXPECT_THROW(SafetensorsReader{write_raw(path("bad.safetensors"), json, data)}, UserError) << json;
  };
  refused("{not json", 0);
  refused("[1, 2]", 0);
  refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 8);    // size mismatch
  refused(R"({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8);     // unknown dtype
  refused(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8);   // negative dim
  refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12);  // overlap
  refused(R"({"a": {"dtype": "F32", "shape": [2]}})", 8);                             // no offsets
  refused(R"({"__metadata__": {"k": 1}})", 0);                                        // non-string metadata
  // Element and byte counts that overflow 64 bits once passed for empty tensors.
  for (const char* shape : {"[4611686018427387904, 4]", "[4294967296, 4294967296]", "[18446744073709551615]",
                            "[2305843009213693952]"})
    try {
      SafetensorsReader{write_raw(path("overflow.safetensors"),
                                  std::string(R"({"a": {"dtype": "F32", "shape": )") + shape +
                                      R"(, "data_offsets": [0, 0]}})",
                                  0)};
      ADD_FAILURE() << "accepted the shape " << shape;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("overflows 64 bits"), std::string::npos) << e.what();
    }
  // A header length beyond the file.
  std::string bytes(8, '\0');
  bytes[0] = 100;
  std::ofstream(path("long.safetensors"), std::ios::binary) << bytes << "{}";
  EXPECT_THROW(SafetensorsReader{path("long.safetensors")}, UserError);
  // The same checks accept a well-formed file with a scalar and an empty tensor.
  const SafetensorsReader ok(write_raw(path("ok.safetensors"),
                                       R"({"s": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]},
                                           "e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [8, 8]}})",
                                       8));
  EXPECT_EQ(ok.header().entries.size(), 2u);
}

// As the format requires, the entries lie back to back from byte 0 to the end of the file, empty
// ones included. Two weights aliased to the same bytes once passed when an empty tensor (whose
// name a reader may ignore) sorted between them.
TEST_F(SafetensorsFileTest, EntriesLieBackToBackToTheEndOfTheFile) {
  const auto error_of = [&](const std::string& json, std::size_t data) {
    return user_error_of([&] { SafetensorsReader{write_raw(path("bad.safetensors"), json, data)}; });
  };
  const std::string file = path("bad.safetensors");
  expect_mentions(error_of(R"({"lm_head.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "m.ignored": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                               "model.embed.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                           8),
                  {file, R"(entries "lm_head.weight" [0, 8) and "model.embed.weight" [0, 8) overlap)"});
  expect_mentions(error_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                           8),
                  {file, R"("a" [0, 8) and "e" [4, 4) overlap)"});
  expect_mentions(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                               "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                           12),
                  {file, R"(bytes [4, 8) before entry "b" belong to no tensor)"});
  expect_mentions(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
                  {file, R"(bytes [0, 4) before entry "a")"});
  expect_mentions(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12),
                  {file, "8 bytes follow the last tensor's data"});
  // Empty tensors at the start, between two others and at the end are in their place.
  const SafetensorsReader ok(write_raw(path("ok.safetensors"),
                                       R"({"e0": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                                           "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                           "e1": {"dtype": "BF16", "shape": [3, 0], "data_offsets": [4, 4]},
                                           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                                           "e2": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})",
                                       8));
  EXPECT_EQ(ok.header().entries.size(), 5u);
  EXPECT_EQ(ok.header().data_bytes, 8u);
}

TEST_F(SafetensorsFileTest, ReadingAnUnconvertibleDtypeIsAUserError) {
  const SafetensorsReader r(write_raw(path("i64.safetensors"),
                                      R"({"i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8));
  float out = 0;
  EXPECT_THROW(r.read_f32(r.header().entries[0], &out), UserError);
}

}  // namespace
}  // namespace ustrain
