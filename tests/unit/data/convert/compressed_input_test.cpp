// gzip and zstd inputs give the datasets their uncompressed files give; damaged, truncated and
// misnamed compressed files are refused with the file named and nothing left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/inputs/compressed_input.h"
#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "tests/unit/data/convert/compressed_writers.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

using test::gzip_member;
using test::zstd_frame;

// Text of blank-line-separated documents, over 1 MiB so that reads cross chunk boundaries.
std::string corpus_text() {
  std::string text;
  const char* words[] = {"tide", "harbour", "gull", "rope", "lantern", "salt", "keel", "fog"};
  for (int d = 0; text.size() < (3u << 19); ++d) {
    for (int w = 0; w < 5 + d % 23; ++w) text += std::string(words[(d * 3 + w * 5) % 8]) + (w % 9 == 8 ? "\n" : " ");
    text += "\n\n";
  }
  return text;
}

std::string corpus_jsonl() {
  std::string jsonl;
  for (int d = 0; jsonl.size() < (3u << 19); ++d)
    jsonl += "{\"text\": \"document " + std::to_string(d) + std::string(static_cast<std::size_t>(d % 40), 'x') +
             "\"}\n";
  return jsonl;
}

ConvertOptions detected(const std::string& input, const std::string& output) {
  ConvertOptions options;
  options.inputs = {input};
  options.output_dir = output;
  options.val_fraction = 0.1;
  return options;
}

struct Converted {
  ConvertReport report;
  std::vector<std::string> train, val;
};

Converted convert(const std::string& input, const std::string& output) {
  Converted converted;
  converted.report = convert_dataset(detected(input, output));
  const TokenDataset dataset = TokenDataset::open(output);
  converted.train = test::read_documents(dataset, Split::train);
  converted.val = test::read_documents(dataset, Split::val);
  return converted;
}

void expect_same_dataset(const Converted& plain, const Converted& other, const std::string& what) {
  EXPECT_EQ(other.report.format, plain.report.format) << what;
  EXPECT_EQ(other.report.documents, plain.report.documents) << what;
  EXPECT_EQ(other.report.train_tokens, plain.report.train_tokens) << what;
  EXPECT_EQ(other.report.val_tokens, plain.report.val_tokens) << what;
  EXPECT_TRUE(other.train == plain.train) << what;
  EXPECT_TRUE(other.val == plain.val) << what;
}

void expect_nothing_left(const test::ScratchDir& scratch, const std::string& output) {
  for (const fs::directory_entry& entry : fs::directory_iterator(scratch.path()))
    EXPECT_FALSE(entry.path().filename().string().starts_with(output)) << entry.path();
}

TEST(DataCompressedInput, GzipAndZstdGiveTheDatasetOfTheUncompressedFile) {
  test::ScratchDir scratch;
  for (const auto& [name, content] : {std::pair{std::string("corpus.txt"), corpus_text()},
                                      std::pair{std::string("corpus.jsonl"), corpus_jsonl()}}) {
    test::write_file(scratch / name, content);
    const std::size_t half = content.size() / 2;
    test::write_file(scratch / (name + ".gz"), gzip_member(content));
    // Several members (`cat a.gz b.gz`) and several frames are one stream.
    test::write_file(scratch / ("two-" + name + ".gz"),
                     gzip_member(content.substr(0, half)) + gzip_member(content.substr(half)));
    test::write_file(scratch / (name + ".zst"), zstd_frame(content.substr(0, half)) + zstd_frame(content.substr(half)));
    const Converted plain = convert(scratch / name, scratch / ("out-" + name));
    EXPECT_GT(plain.report.documents, 1000);
    EXPECT_GT(plain.val.size(), 0u);
    for (const std::string& compressed : {name + ".gz", "two-" + name + ".gz", name + ".zst"}) {
      const Converted other = convert(scratch / compressed, scratch / ("out-" + compressed));
      expect_same_dataset(plain, other, compressed);
      // Progress and the throughput count the bytes as stored: the compressed ones.
      EXPECT_EQ(other.report.bytes_read, static_cast<std::int64_t>(fs::file_size(scratch / compressed))) << compressed;
    }
  }
}

TEST(DataCompressedInput, ReadsCompressedFilesFromADirectory) {
  test::ScratchDir scratch;
  const std::string jsonl = corpus_jsonl();
  test::write_file(scratch / "plain/a.jsonl", jsonl);
  test::write_file(scratch / "packed/a.jsonl.zst", zstd_frame(jsonl));
  // Not read: a directory read as JSONL gives its .jsonl files (a text file beside them would be
  // refused as a second format, see DataInputFormat).
  test::write_file(scratch / "packed/index.bin", std::string("\0\1\2\3", 4));
  expect_same_dataset(convert(scratch / "plain", scratch / "out-plain"),
                      convert(scratch / "packed", scratch / "out-packed"), "a directory of .jsonl.zst");
}

TEST(DataCompressedInput, CompressedBytesUnderAnotherNameAreReadDecompressed) {
  test::ScratchDir scratch;
  const std::string text = corpus_text();
  test::write_file(scratch / "corpus.txt", text);
  test::write_file(scratch / "gzip-inside.txt", gzip_member(text));
  test::write_file(scratch / "zstd-inside", zstd_frame(text));
  EXPECT_EQ(compression_of(scratch / "gzip-inside.txt"), Compression::gzip);
  const Converted plain = convert(scratch / "corpus.txt", scratch / "out-plain");
  expect_same_dataset(plain, convert(scratch / "gzip-inside.txt", scratch / "out-gzip"), "gzip named .txt");
  expect_same_dataset(plain, convert(scratch / "zstd-inside", scratch / "out-zstd"), "zstd without extension");
}

TEST(DataCompressedInput, ANameThatPromisesCompressionMustHoldIt) {
  test::ScratchDir scratch;
  test::write_file(scratch / "plain.txt.gz", corpus_text());
  test::write_file(scratch / "swapped.txt.zst", gzip_member(corpus_text()));
  for (const char* name : {"plain.txt.gz", "swapped.txt.zst"}) {
    for (const char* format : {"", "text"}) {
      ConvertOptions options = detected(scratch / name, scratch / "out");
      options.format = format;
      test::expect_user_error([&] { convert_dataset(options); }, {scratch / name, "does not start with the"});
      expect_nothing_left(scratch, "out");
    }
  }
}

TEST(DataCompressedInput, DamagedOrTruncatedDataIsAnErrorNamingTheFile) {
  test::ScratchDir scratch;
  const std::string text = corpus_text();
  const std::string gzip = gzip_member(text), zstd = zstd_frame(text);
  std::string gzip_damaged = gzip, zstd_damaged = zstd;
  for (std::size_t i = gzip.size() / 2; i < gzip.size() / 2 + 64; ++i) gzip_damaged[i] ^= 0x5a;
  for (std::size_t i = zstd.size() / 2; i < zstd.size() / 2 + 64; ++i) zstd_damaged[i] ^= 0x5a;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cut.txt.gz", gzip.substr(0, gzip.size() * 2 / 3)}, {"cut.txt.zst", zstd.substr(0, zstd.size() * 2 / 3)},
      {"cut-trailer.txt.gz", gzip.substr(0, gzip.size() - 4)},  // the data whole, its length field gone
      {"bad.txt.gz", gzip_damaged},                           {"bad.txt.zst", zstd_damaged}};
  for (const auto& [name, bytes] : cases) {
    test::write_file(scratch / name, bytes);
    const bool cut = name.starts_with("cut");
    const std::string kind = name.ends_with(".gz") ? "gzip" : "zstd";
    test::expect_user_error([&] { convert_dataset(detected(scratch / name, scratch / "out")); },
                            {scratch / name, cut ? "truncated" : "corrupt " + kind + " data", kind + " -t"});
    expect_nothing_left(scratch, "out");
  }
}

TEST(DataCompressedInput, TokenFormatsRefuseCompressedFiles) {
  test::ScratchDir scratch;
  test::write_file(scratch / "ids.npy.gz", gzip_member("not read"));
  ConvertOptions options = detected(scratch / "ids.npy.gz", scratch / "out");
  test::expect_user_error([&] { convert_dataset(options); }, {scratch / "ids.npy.gz", "decompress it first"});
  options.format = "npy";
  options.tokenizer = "byte";
  test::expect_user_error([&] { convert_dataset(options); }, {scratch / "ids.npy.gz", "decompress it first"});
}

}  // namespace
}  // namespace ustrain
