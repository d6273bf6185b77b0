// A document longer than the maximum document size (a JSONL line longer than it) stops the
// conversion with the file and the document named, compressed or not, and leaves nothing
// behind; documents up to the maximum are converted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "data/convert/convert.h"
#include "tests/unit/data/convert/compressed_writers.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMaximum = 1 << 20;

ConvertOptions options_for(const std::string& input, const std::string& output) {
  ConvertOptions options;
  options.inputs = {input};
  options.output_dir = output;
  options.max_document_bytes = kMaximum;
  return options;
}

void expect_nothing_left(const test::ScratchDir& scratch) {
  for (const fs::directory_entry& entry : fs::directory_iterator(scratch.path()))
    EXPECT_FALSE(entry.path().filename().string().starts_with("out")) << entry.path();
}

// Lines of 64 bytes making `bytes` in all.
std::string lines_of(std::size_t bytes) {
  std::string text;
  while (text.size() < bytes) text += std::string(63, 'w') + "\n";
  return text.substr(0, bytes);
}

TEST(DataDocumentSize, ATextDocumentLongerThanTheMaximumIsAnErrorNamingIt) {
  test::ScratchDir scratch;
  const std::string text = "first document\n\n" + lines_of(kMaximum + 64) + "\nlast document\n";
  test::write_file(scratch / "plain.txt", text);
  test::write_file(scratch / "packed.txt.zst", test::zstd_frame(text));
  for (const char* name : {"plain.txt", "packed.txt.zst"}) {
    test::expect_user_error([&] { convert_dataset(options_for(scratch / name, scratch / "out")); },
                            {scratch / name + ": document 2 of the file (from line 3) is longer than the maximum "
                                              "document size, 1 MiB",
                             "--max-document-mib"});
    expect_nothing_left(scratch);
  }
}

TEST(DataDocumentSize, AJsonlLineLongerThanTheMaximumIsAnErrorNamingIt) {
  test::ScratchDir scratch;
  const std::string jsonl = "{\"text\": \"short\"}\n{\"text\": \"" + std::string(kMaximum, 'j') + "\"}\n";
  test::write_file(scratch / "lines.jsonl.gz", test::gzip_member(jsonl));
  test::write_file(scratch / "unending.jsonl", "{\"text\": \"" + std::string(3 * kMaximum, 'j'));
  for (const auto& [name, line] : {std::pair{"lines.jsonl.gz", 2}, std::pair{"unending.jsonl", 1}}) {
    test::expect_user_error([&] { convert_dataset(options_for(scratch / name, scratch / "out")); },
                            {fmt::format("{}:{}: the line is longer than the maximum document size, 1 MiB",
                                         scratch / name, line),
                             "--max-document-mib"});
    expect_nothing_left(scratch);
  }
}

TEST(DataDocumentSize, DocumentsUpToTheMaximumAreConverted) {
  test::ScratchDir scratch;
  test::write_file(scratch / "corpus.txt", "short\n\n" + lines_of(kMaximum) + "\n\n" + lines_of(kMaximum - 1));
  const std::string line = "{\"text\": \"" + std::string(kMaximum - 12, 'j') + "\"}";
  ASSERT_EQ(line.size(), static_cast<std::size_t>(kMaximum));
  test::write_file(scratch / "lines.jsonl", line + "\n" + line);
  ConvertOptions options = options_for(scratch / "corpus.txt", scratch / "out-text");
  options.val_fraction = 0;
  EXPECT_EQ(convert_dataset(options).documents, 3);
  options = options_for(scratch / "lines.jsonl", scratch / "out-jsonl");
  options.val_fraction = 0;
  EXPECT_EQ(convert_dataset(options).documents, 2);
}

TEST(DataDocumentSize, TheMaximumMustBePositive) {
  test::ScratchDir scratch;
  test::write_file(scratch / "corpus.txt", "text\n");
  ConvertOptions options = options_for(scratch / "corpus.txt", scratch / "out");
  options.max_document_bytes = 0;
  test::expect_user_error([&] { convert_dataset(options); }, {"maximum document size", "must be positive"});
}

}  // namespace
}  // namespace ustrain
