// JSONL input, re-sharding and re-tokenizing existing datasets, and options that must not
// change the result (worker threads).
#include <gtest/gtest.h>

#include <filesystem>

#include "data/tokenizers/byte_tokenizer.h"
#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "data/convert/tokenizer_training.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;
using Documents = std::vector<std::string>;

ConvertOptions options_for(const std::string& format, const std::vector<std::string>& inputs, const std::string& output) {
  ConvertOptions options;
  options.format = format;
  options.inputs = inputs;
  options.output_dir = output;
  options.val_fraction = 0;
  return options;
}

TEST(DataConvertSources, JsonlTakesTheChosenField) {
  test::ScratchDir scratch;
  test::write_file(scratch / "in/a.jsonl",
                   "{\"text\": \"first\\nline\", \"body\": \"x\"}\n\n{\"text\": \"caf\\u00e9 \\\"quoted\\\"\"}\n");
  test::write_file(scratch / "in/b.jsonl", "{\"text\": \"   \"}\r\n{\"text\": \"last, no newline\"}");
  test::write_file(scratch / "in/notes.txt", "skipped: directories give only .jsonl files");
  const ConvertReport report = convert_dataset(options_for("jsonl", {scratch / "in"}, scratch / "out"));
  EXPECT_EQ(report.documents, 3);
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "out"), Split::train),
            (Documents{"first\nline", "caf\xC3\xA9 \"quoted\"", "last, no newline"}));
  ConvertOptions body = options_for("jsonl", {scratch / "in/a.jsonl"}, scratch / "body");
  body.text_field = "body";
  test::expect_user_error([&] { convert_dataset(body); }, {scratch / "in/a.jsonl:3", "no field \"body\"", "--text-field"});
}

TEST(DataConvertSources, BadJsonlLinesNameFileAndLine) {
  test::ScratchDir scratch;
  test::write_file(scratch / "bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n");
  test::expect_user_error([&] { convert_dataset(options_for("jsonl", {scratch / "bad.jsonl"}, scratch / "o1")); },
                          {scratch / "bad.jsonl:2", "not valid JSON"});
  test::write_file(scratch / "array.jsonl", "[1, 2]\n");
  test::expect_user_error([&] { convert_dataset(options_for("jsonl", {scratch / "array.jsonl"}, scratch / "o2")); },
                          {scratch / "array.jsonl:1", "not an object"});
  test::write_file(scratch / "number.jsonl", "{\"text\": 5}\n");
  test::expect_user_error([&] { convert_dataset(options_for("jsonl", {scratch / "number.jsonl"}, scratch / "o3")); },
                          {scratch / "number.jsonl:1", "not a string"});
  EXPECT_FALSE(fs::exists(scratch / "o1"));
}

class DataReshard : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 200; ++i) {
      documents_.push_back("entry " + std::to_string(i) + (i % 3 ? " with some more words" : "") + "\n");
      text += documents_.back() + "%\n";
    }
    test::write_file(scratch_ / "in.txt", text);
    ConvertOptions options = options_for("text", {scratch_ / "in.txt"}, source_);
    options.split = "line:%";
    options.val_fraction = 0.2;
    options.shard_tokens = 500;
    convert_dataset(options);
  }

  std::string train_model() const {
    TokenizerTrainOptions train;
    train.inputs = {scratch_ / "in.txt"};
    train.split = "line:%";
    train.output = scratch_ / "tok.model";
    train.vocab_size = 300;
    train_tokenizer(train);
    return train.output;
  }

  Documents split_documents(const std::string& dir, Split split) const {
    return test::read_documents(TokenDataset::open(dir), split);
  }

  test::ScratchDir scratch_;
  const std::string source_ = scratch_ / "source";
  Documents documents_;
};

TEST_F(DataReshard, ReshardingKeepsEveryDocumentInItsSplit) {
  ConvertOptions options = options_for("shards", {source_}, scratch_ / "resharded");
  options.shard_tokens = 333;
  options.compression = 3;
  convert_dataset(options);
  const TokenDataset before = TokenDataset::open(source_), after = TokenDataset::open(scratch_ / "resharded");
  for (Split split : {Split::train, Split::val}) {
    EXPECT_EQ(after.read_all(split), before.read_all(split)) << split_name(split);
    EXPECT_EQ(split_documents(scratch_ / "resharded", split), split_documents(source_, split));
  }
  EXPECT_EQ(after.shards(Split::train)[0].tokens, 333);
  EXPECT_EQ(after.compression(), "deflate:3");
  EXPECT_GT(after.tokens(Split::val), 0);
}

TEST_F(DataReshard, RetokenizingDecodesAndEncodesEachDocument) {
  ConvertOptions options = options_for("shards", {source_}, scratch_ / "sp");
  options.tokenizer = train_model();
  convert_dataset(options);
  const TokenDataset retokenized = TokenDataset::open(scratch_ / "sp");
  EXPECT_EQ(retokenized.tokenizer().kind, "sentencepiece");
  EXPECT_LT(retokenized.tokens(Split::train), TokenDataset::open(source_).tokens(Split::train));
  // Back to bytes: the same documents in the same splits.
  ConvertOptions back = options_for("shards", {scratch_ / "sp"}, scratch_ / "bytes-again");
  back.tokenizer = "byte";
  convert_dataset(back);
  for (Split split : {Split::train, Split::val})
    EXPECT_EQ(split_documents(scratch_ / "bytes-again", split), split_documents(source_, split)) << split_name(split);
}

TEST_F(DataReshard, DatasetsWithDifferentTokenizersDoNotMix) {
  ConvertOptions sp = options_for("text", {scratch_ / "in.txt"}, scratch_ / "sp");
  sp.tokenizer = train_model();
  convert_dataset(sp);
  test::expect_user_error([&] { convert_dataset(options_for("shards", {source_, scratch_ / "sp"}, scratch_ / "mixed")); },
                          {source_, scratch_ / "sp", "different tokenizers"});
  EXPECT_FALSE(fs::exists(scratch_ / "mixed"));
}

TEST(DataConvertSources, WorkerCountDoesNotChangeTheResult) {
  test::ScratchDir scratch;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "paragraph " + std::to_string(i) + " " + std::string(i % 50, 'x') + "\n\n";
  test::write_file(scratch / "in.txt", text);
  std::vector<std::string> checksums;
  for (int workers : {1, 2, 4}) {
    ConvertOptions options = options_for("text", {scratch / "in.txt"}, scratch / ("w" + std::to_string(workers)));
    options.val_fraction = 0.1;
    options.workers = workers;
    convert_dataset(options);
    std::string all;
    for (Split split : {Split::train, Split::val})
      for (const ShardInfo& shard : TokenDataset::open(options.output_dir).shards(split)) all += shard.checksum;
    checksums.push_back(all);
  }
  EXPECT_EQ(checksums[1], checksums[0]);
  EXPECT_EQ(checksums[2], checksums[0]);
}

}  // namespace
}  // namespace ustrain
