// Converting a directory as text takes only its text files: binaries (a NUL byte or invalid
// UTF-8 in the first 64 KiB) are skipped and counted, while files the user names are read as
// they are; --include picks files by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/convert/convert.h"
#include "data/inputs/text_check.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

using Documents = std::vector<std::string>;

TEST(DataTextCheck, NulBytesAndInvalidUtf8AreNotText) {
  EXPECT_EQ(check_text("plain ASCII\n", true), TextVerdict::text);
  EXPECT_EQ(check_text("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", true), TextVerdict::text);  // 2, 3, 4 bytes
  EXPECT_EQ(check_text("\xEF\xBB\xBFwith a byte-order mark", true), TextVerdict::text);
  EXPECT_EQ(check_text("", true), TextVerdict::text);
  EXPECT_EQ(check_text(std::string("a\0b", 3), true), TextVerdict::nul_byte);
  EXPECT_EQ(check_text("Latin-1 caf\xE9 au lait", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("stray \xFF byte", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("overlong \xC0\x80", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("overlong \xE0\x80\x80", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("surrogate \xED\xA0\x80", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("beyond U+10FFFF \xF4\x90\x80\x80", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("continuation alone \x80", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("lead without its rest \xE2\x82 x", true), TextVerdict::invalid_utf8);
}

TEST(DataTextCheck, ACharacterCutByTheBlockEndIsNotHeldAgainstAFile) {
  // Cut by the end of the block looked at: fine; at the end of the whole file: truncated.
  EXPECT_EQ(check_text("euro \xE2\x82", false), TextVerdict::text);
  EXPECT_EQ(check_text("euro \xE2\x82", true), TextVerdict::invalid_utf8);
  EXPECT_EQ(check_text("bad even if cut \xE2\x28", false), TextVerdict::invalid_utf8);

  test::ScratchDir scratch;
  for (std::size_t before : {kTextCheckBytes - 1, kTextCheckBytes - 2, kTextCheckBytes - 3}) {
    // A 4-byte character that straddles the 64 KiB boundary, then more text.
    const std::string path = scratch / ("straddle-" + std::to_string(before) + ".txt");
    test::write_file(path, std::string(before, 'a') + "\xF0\x9F\x98\x80" + std::string(100, 'b'));
    EXPECT_EQ(check_text_file(path), TextVerdict::text) << before;
  }
  test::write_file(scratch / "late-nul.txt", std::string(kTextCheckBytes, 'a') + std::string(1, '\0'));
  EXPECT_EQ(check_text_file(scratch / "late-nul.txt"), TextVerdict::text);  // beyond the block looked at
}

TEST(DataTextCheck, ConvertingADirectorySkipsFilesThatAreNotText) {
  test::ScratchDir scratch;
  test::write_file(scratch / "pkg/README.md", "A package.\n");
  test::write_file(scratch / "pkg/module.py", "def f():\n    return 1\n");
  test::write_file(scratch / "pkg/module.cpython-311.pyc", std::string("\xA7\x0D\x0D\x0A\0\0\0\0code", 12));
  test::write_file(scratch / "pkg/lib.so", std::string("\x7F" "ELF\2\1\1\0", 8));
  test::write_file(scratch / "pkg/latin1.txt", "caf\xE9\n");
  ConvertOptions options;
  options.inputs = {scratch / "pkg"};
  options.output_dir = scratch / "out";
  options.split = "file";
  options.val_fraction = 0;
  std::vector<std::string> messages;
  const ConvertReport report = convert_dataset(options, [&](const std::string& line) { messages.push_back(line); });
  EXPECT_EQ(report.documents, 2);
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "out"), Split::train),
            (Documents{"A package.\n", "def f():\n    return 1\n"}));
  std::string skipped;
  for (const std::string& line : messages)
    if (line.starts_with("skipped")) skipped = line;
  for (const std::string fragment : {"skipped 3 files that are not text", "2 with a NUL byte", "lib.so",
                                     "module.cpython-311.pyc", "1 not valid UTF-8", "latin1.txt"})
    EXPECT_NE(skipped.find(fragment), std::string::npos) << fragment << " not in: " << skipped;
}

TEST(DataTextCheck, AFileNamedAsAnInputIsReadWhateverItHolds) {
  test::ScratchDir scratch;
  const std::string binary("caf\xC3\xA9 \x00\xFF bytes\n", 15);
  test::write_file(scratch / "raw.txt", binary);
  ConvertOptions options;
  options.inputs = {scratch / "raw.txt"};
  options.output_dir = scratch / "out";
  options.split = "file";
  options.val_fraction = 0;
  convert_dataset(options);
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "out"), Split::train), (Documents{binary}));
}

TEST(DataTextCheck, OnlyBinariesLeftIsAnErrorThatSaysWhy) {
  test::ScratchDir scratch;
  test::write_file(scratch / "bin/a.dat", std::string("\0\1\2", 3));
  ConvertOptions options;
  options.format = "text";
  options.inputs = {scratch / "bin"};
  options.output_dir = scratch / "out";
  test::expect_user_error([&] { convert_dataset(options); },
                          {"no input files found", "skipped 1 file that is not text", "a.dat"});
}

TEST(DataTextCheck, IncludeTakesOnlyMatchingNames) {
  test::ScratchDir scratch;
  test::write_file(scratch / "docs/a.md", "markdown\n");
  test::write_file(scratch / "docs/b.txt", "text\n");
  test::write_file(scratch / "docs/c.py", "print(1)\n");
  test::write_file(scratch / "docs/old.md", "old\n");
  ConvertOptions options;
  options.inputs = {scratch / "docs"};
  options.output_dir = scratch / "out";
  options.split = "file";
  options.val_fraction = 0;
  options.include = {"*.md", "*.txt"};
  options.exclude = {"old.*"};
  convert_dataset(options);
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "out"), Split::train),
            (Documents{"markdown\n", "text\n"}));
  options.include = {"*.rst"};
  options.output_dir = scratch / "none";
  test::expect_user_error([&] { convert_dataset(options); }, {"no input files found", "only *.rst", "excluding old.*"});
}

}  // namespace
}  // namespace ustrain
