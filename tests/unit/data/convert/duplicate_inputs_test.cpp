// Files reached twice (links, repeats, copies) are read once, and the conversion says which.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "data/inputs/duplicate_inputs.h"
#include "data/inputs/input_files.h"
#include "tests/unit/data/convert/compressed_writers.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;
using Documents = std::vector<std::string>;

std::vector<std::string> paths(const std::vector<InputFile>& files) {
  std::vector<std::string> out;
  for (const InputFile& file : files) out.push_back(file.path);
  return out;
}

TEST(DataDuplicateInputs, LinksRepeatsAndCopiesAreDroppedWithTheReason) {
  test::ScratchDir scratch;
  test::write_file(scratch / "d/a", "one\n\ntwo\n");
  test::write_file(scratch / "d/b-copy", "one\n\ntwo\n");
  test::write_file(scratch / "d/c-same-size", "one\n\nTWO\n");
  test::write_file(scratch / "d/empty1", "");
  test::write_file(scratch / "d/empty2", "");
  fs::create_symlink("a", scratch / "d/a.u8");
  fs::create_hard_link(scratch / "d/a", scratch / "d/hard");
  std::vector<InputFile> files = list_input_files({scratch / "d", scratch / "d/a"}, {});
  std::vector<DuplicateInput> dropped;
  const std::vector<InputFile> kept = drop_duplicate_inputs(files, dropped);
  EXPECT_EQ(paths(kept), (std::vector<std::string>{scratch / "d/a", scratch / "d/c-same-size", scratch / "d/empty1",
                                                   scratch / "d/empty2"}));
  ASSERT_EQ(dropped.size(), 4u);
  EXPECT_EQ(dropped[0].path, scratch / "d/a.u8");
  EXPECT_EQ(dropped[0].reason, "a symbolic link to " + scratch / "d/a");
  EXPECT_EQ(dropped[1].reason, "a hard link to " + scratch / "d/a");
  EXPECT_EQ(dropped[2].reason, "named twice");
  EXPECT_EQ(dropped[3].path, scratch / "d/b-copy");
  EXPECT_EQ(dropped[3].reason, "the same content as " + scratch / "d/a");
  EXPECT_NE(describe_duplicates(dropped).find("skipped 4 input files reached twice"), std::string::npos);
}

// What `gzip -k` leaves: the file beside its compressed copy, read once; a compressed file
// whose content differs from its namesake's is kept, and compressed files alone are not read here.
TEST(DataDuplicateInputs, ACompressedCopyBesideItsFileIsReadOnce) {
  test::ScratchDir scratch;
  test::write_file(scratch / "d/a.jsonl", "{\"text\": \"a\"}\n");
  test::write_file(scratch / "d/a.jsonl.gz", test::gzip_member("{\"text\": \"a\"}\n"));
  test::write_file(scratch / "d/a.jsonl.zst", test::zstd_frame("{\"text\": \"a\"}\n"));
  test::write_file(scratch / "d/b.jsonl", "{\"text\": \"b\"}\n");
  test::write_file(scratch / "d/b.jsonl.gz", test::gzip_member("{\"text\": \"B\"}\n"));
  test::write_file(scratch / "d/c.jsonl.zst", test::zstd_frame("{\"text\": \"c\"}\n"));
  std::vector<DuplicateInput> dropped;
  const std::vector<InputFile> kept = drop_duplicate_inputs(list_input_files({scratch / "d"}, {}), dropped);
  EXPECT_EQ(paths(kept), (std::vector<std::string>{scratch / "d/a.jsonl", scratch / "d/b.jsonl",
                                                   scratch / "d/b.jsonl.gz", scratch / "d/c.jsonl.zst"}));
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0].path, scratch / "d/a.jsonl.gz");
  EXPECT_EQ(dropped[0].reason, "the same content as " + scratch / "d/a.jsonl" + ", decompressed");
  EXPECT_EQ(dropped[1].path, scratch / "d/a.jsonl.zst");
}

TEST(DataDuplicateInputs, ALinkReadFirstKeepsItsTarget) {
  test::ScratchDir scratch;
  test::write_file(scratch / "d/z-target", "text\n");
  fs::create_symlink("z-target", scratch / "d/a-link");
  std::vector<DuplicateInput> dropped;
  const std::vector<InputFile> kept = drop_duplicate_inputs(list_input_files({scratch / "d"}, {}), dropped);
  EXPECT_EQ(paths(kept), std::vector<std::string>{scratch / "d/a-link"});
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].reason, "the file that " + scratch / "d/a-link" + ", a symbolic link read before, points to");
}

TEST(DataDuplicateInputs, AConversionReadsEachDocumentOnceAndSaysWhichFilesItSkipped) {
  test::ScratchDir scratch;
  test::write_file(scratch / "fortunes/art", "a fortune\n%\nanother fortune\n");
  test::write_file(scratch / "fortunes/off/art", "a fortune\n%\nanother fortune\n");
  test::write_file(scratch / "fortunes/zen", "a third\n");
  fs::create_symlink("art", scratch / "fortunes/art.u8");
  ConvertOptions options;
  options.inputs = {scratch / "fortunes"};
  options.output_dir = scratch / "out";
  options.split = "line:%";
  options.val_fraction = 0;
  std::vector<std::string> messages;
  const ConvertReport report = convert_dataset(options, [&](const std::string& line) { messages.push_back(line); });
  EXPECT_EQ(report.documents, 3);
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "out"), Split::train),
            (Documents{"a fortune\n", "another fortune\n", "a third\n"}));
  const std::string expected = "note: skipped 2 input files reached twice, so that no document is read twice: " +
                               scratch / "fortunes/art.u8" + " (a symbolic link to " + scratch / "fortunes/art" +
                               "), " + scratch / "fortunes/off/art" + " (the same content as " +
                               scratch / "fortunes/art" + ")";
  EXPECT_NE(std::find(messages.begin(), messages.end(), expected), messages.end())
      << fmt::format("{}", fmt::join(messages, "\n"));
}

}  // namespace
}  // namespace ustrain
