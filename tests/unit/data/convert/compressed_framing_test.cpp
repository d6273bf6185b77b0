// Framings that compression tools write and `zstd -t` / `gzip -t` accept are read as one
// stream: zstd frames among skippable frames (pzstd's output), zstd windows up to 2^31 bytes
// (zstd --long=31), gzip members followed by zero padding (tape and tar tools). Damage after
// the padding is still refused, naming the file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/inputs/compressed_input.h"
#include "tests/unit/data/convert/compressed_writers.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

// Numbered lines, over 1 MiB so that reads cross the readers' chunk boundaries.
std::string numbered_lines() {
  std::string text;
  for (int i = 0; text.size() < (3u << 19); ++i) text += "line " + std::to_string(i) + " of the framing test\n";
  return text;
}

std::string read_all(InputReader& reader) {
  std::string content;
  std::vector<char> buffer(1 << 16);
  while (const std::size_t got = reader.read(buffer.data(), buffer.size())) content.append(buffer.data(), got);
  return content;
}

std::string read_all(const std::string& path) {
  InputReader reader(path);
  return read_all(reader);
}

TEST(DataCompressedFraming, ZstdSkippableFramesAreSkipped) {
  test::ScratchDir scratch;
  const std::string text = numbered_lines(), first = text.substr(0, text.size() / 3), rest = text.substr(first.size());
  // pzstd starts the file with a skippable frame; others may stand between frames and at the end.
  const std::string zstd = test::zstd_skippable_frame("frame index") + test::zstd_frame(first) +
                           test::zstd_skippable_frame(std::string(5000, 'i'), 7) + test::zstd_frame(rest) +
                           test::zstd_skippable_frame("", 15);
  for (const char* name : {"frames.txt.zst", "frames-without-suffix"}) {
    test::write_file(scratch / name, zstd);
    EXPECT_EQ(compression_of(scratch / name), Compression::zstd) << name;
    EXPECT_TRUE(read_all(scratch / name) == text) << name;
  }
}

TEST(DataCompressedFraming, ZstdWindowsUpTo2To31BytesAreRead) {
  test::ScratchDir scratch;
  const std::string text = numbered_lines();
  test::write_file(scratch / "long.txt.zst", test::zstd_stream_frame(text, 31));
  EXPECT_TRUE(read_all(scratch / "long.txt.zst") == text);
}

TEST(DataCompressedFraming, GzipZeroPaddingAfterTheLastMemberIsIgnored) {
  test::ScratchDir scratch;
  const std::string text = numbered_lines(), first = text.substr(0, text.size() / 2), rest = text.substr(first.size());
  const std::string members = test::gzip_member(first) + test::gzip_member(rest);
  // A tar block's worth, and more padding than one read of the file takes.
  for (const std::size_t padding : {std::size_t{512}, std::size_t{3} << 19}) {
    test::write_file(scratch / "padded.txt.gz", members + std::string(padding, '\0'));
    EXPECT_TRUE(read_all(scratch / "padded.txt.gz") == text) << padding << " zero bytes";
  }
}

TEST(DataCompressedFraming, BytesAfterZeroPaddingAreDamage) {
  test::ScratchDir scratch;
  const std::string member = test::gzip_member(numbered_lines());
  for (const std::size_t padding : {std::size_t{100}, std::size_t{3} << 19}) {
    test::write_file(scratch / "bad.txt.gz", member + std::string(padding, '\0') + "x");
    test::expect_user_error([&] { read_all(scratch / "bad.txt.gz"); },
                            {scratch / "bad.txt.gz", "corrupt gzip data", "zero padding", "gzip -t"});
  }
}

// The fuzz target reads from memory: the same content and refusals as a file gives.
TEST(DataCompressedFraming, ContentInMemoryReadsAsTheFileWould) {
  const std::string text = numbered_lines();
  for (const std::string& bytes : {text, test::gzip_member(text) + std::string(100, '\0'),
                                   test::zstd_skippable_frame("index") + test::zstd_frame(text)}) {
    InputReader reader(bytes, "memory");
    EXPECT_TRUE(read_all(reader) == text);
  }
  InputReader empty(std::string_view(), "empty");
  EXPECT_EQ(read_all(empty), "");
  test::expect_user_error([&] { InputReader(text, "named.txt.gz"); }, {"named.txt.gz", "does not start with"});
  const std::string cut = test::gzip_member(text).substr(0, 1000);
  test::expect_user_error([&] { InputReader reader(cut, "cut.gz"); read_all(reader); }, {"cut.gz", "truncated"});
}

}  // namespace
}  // namespace ustrain
