// Files a user names must be regular files: a FIFO (which would block the open until some
// process writes to it), a directory or a device is refused at once with a message naming the
// path and what it is, by the helper and by the data readers that use it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "data/tokenizers/hf_tokenizer.h"
#include "data/shards/manifest.h"
#include "data/files/regular_file.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "tests/unit/data/test_support.h"
#include "tests/unit/support/fifo_support.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

TEST(RegularFile, ReadsAWholeFile) {
  test::ScratchDir dir;
  const std::string content = std::string(200000, 'x') + "end";
  test::write_file(dir / "a.txt", content);
  EXPECT_EQ(read_regular_file(dir / "a.txt"), content);
  test::write_file(dir / "empty.txt", "");
  EXPECT_EQ(read_regular_file(dir / "empty.txt"), "");
  const OpenedFile opened = open_regular_file(dir / "a.txt");
  EXPECT_EQ(opened.bytes, content.size());
  ::close(opened.fd);
}

TEST(RegularFile, AFifoIsRefusedAtOnce) {
  test::ScratchDir dir;
  test::make_fifo(dir / "pipe");
  expect_mentions(test::error_reading_fifo(dir / "pipe", [&] { read_regular_file(dir / "pipe"); }),
                        {dir / "pipe", "is a FIFO (named pipe), not a regular file"});
}

TEST(RegularFile, DirectoriesDevicesAndMissingFilesAreRefusedNamingThePath) {
  test::ScratchDir dir;
  test::expect_user_error([&] { read_regular_file(dir.path().string()); },
                          {dir.path().string(), "is a directory, not a regular file"});
  test::expect_user_error([&] { read_regular_file("/dev/null"); }, {"/dev/null is a device file, not a regular file"});
  test::expect_user_error([&] { read_regular_file(dir / "absent.json"); },
                          {"cannot open " + dir / "absent.json", "No such file or directory"});
}

TEST(RegularFile, DataReadersRefuseAFifo) {
  test::ScratchDir dir;
  test::make_fifo(dir / "tokenizer.json");
  expect_mentions(
      test::error_reading_fifo(dir / "tokenizer.json", [&] { HfTokenizer::from_file(dir / "tokenizer.json"); }),
      {dir / "tokenizer.json is a FIFO"});
  test::make_fifo(dir / "manifest.json");
  expect_mentions(test::error_reading_fifo(dir / "manifest.json", [&] { read_manifest(dir / "manifest.json"); }),
                        {dir / "manifest.json is a FIFO"});
}

// A FIFO as a sentencepiece model was reported as "not found", sending the user to check a path
// that exists.
TEST(RegularFile, ASentencePieceModelThatIsAFifoIsNamedAsOne) {
  test::ScratchDir dir;
  test::make_fifo(dir / "tokenizer.model");
  expect_mentions(
      test::error_reading_fifo(dir / "tokenizer.model", [&] { SentencePieceTokenizer tokenizer(dir / "tokenizer.model"); }),
      {dir / "tokenizer.model is a FIFO (named pipe), not a regular file"});
}

}  // namespace
}  // namespace ustrain
