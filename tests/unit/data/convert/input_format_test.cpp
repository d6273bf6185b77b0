// Without --format, conversions and tokenizer training tell the format from the inputs: by
// magic number, extension and content, a dataset directory by its manifest; they say what
// they detected and why, and refuse inputs that disagree or cannot be told apart.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "data/convert/convert.h"
#include "data/inputs/input_format.h"
#include "data/tokenizers/tokenizer.h"
#include "data/convert/tokenizer_training.h"
#include "tests/unit/data/convert/foreign_writers.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

using Documents = std::vector<std::string>;

std::string detected(const std::vector<std::string>& inputs, const NameFilter& filter = {}) {
  return detect_input_format(inputs, filter).format;
}

TEST(DataInputFormat, JsonlIsReadAsJsonlWithoutFormat) {
  test::ScratchDir scratch;
  test::write_file(scratch / "corpus.jsonl", "{\"text\": \"first\"}\n{\"text\": \"second\", \"id\": 2}\n");
  ConvertOptions options;
  options.inputs = {scratch / "corpus.jsonl"};
  options.output_dir = scratch / "out";
  options.val_fraction = 0;
  std::vector<std::string> messages;
  const ConvertReport report = convert_dataset(options, [&](const std::string& line) { messages.push_back(line); });
  EXPECT_EQ(report.format, "jsonl");
  EXPECT_EQ(test::read_documents(TokenDataset::open(scratch / "out"), Split::train), (Documents{"first", "second"}));
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.front(), "input format jsonl: " + scratch / "corpus.jsonl" + " ends in .jsonl (--format chooses "
                              "another)");
}

TEST(DataInputFormat, FilesAreToldByMagicThenExtensionThenContent) {
  test::ScratchDir scratch;
  test::write_llmc(scratch / "shard16", {50256, 1, 2}, /*uint32=*/false);
  test::write_llmc(scratch / "shard32.bin", {50256, 70000}, /*uint32=*/true);
  test::write_megatron(scratch / "mega", {{{1, 2}}, {{3}}}, 8);
  test::write_npy(scratch / "ids", "<u2", {3}, {1, 2, 3});
  test::write_file(scratch / "notes.txt", "{\"text\": \"a .txt file stays text\"}\n");
  test::write_file(scratch / "records.json", "{\"text\": \"x\"}\n");
  test::write_file(scratch / "README", "plain words\n");
  test::write_file(scratch / "lines", "\n{\"text\": \"JSON lines without an extension\"}\n");
  EXPECT_EQ(detected({scratch / "shard16"}), "llmc");
  EXPECT_EQ(detected({scratch / "shard32.bin"}), "llmc");
  EXPECT_EQ(detected({scratch / "mega"}), "megatron");  // the prefix
  EXPECT_EQ(detected({scratch / "mega.idx"}), "megatron");
  EXPECT_EQ(detected({scratch / "mega.bin"}), "megatron");
  EXPECT_EQ(detected({scratch / "ids"}), "npy");
  EXPECT_EQ(detected({scratch / "notes.txt"}), "text");
  EXPECT_EQ(detected({scratch / "records.json"}), "jsonl");
  EXPECT_EQ(detected({scratch / "README"}), "text");
  EXPECT_EQ(detected({scratch / "lines"}), "jsonl");
  EXPECT_EQ(detected({scratch / "shard16", scratch / "shard32.bin"}), "llmc");
  const DetectedFormat why = detect_input_format({scratch / "shard16"}, {});
  EXPECT_NE(why.reason.find("magic 20240520"), std::string::npos) << why.reason;
}

TEST(DataInputFormat, DirectoriesAreToldByTheirFiles) {
  test::ScratchDir scratch;
  test::write_file(scratch / "hf/data/train.jsonl", "{\"text\": \"a\"}\n");
  test::write_file(scratch / "hf/README.md", "A dataset card.\n");
  test::write_file(scratch / "books/a.txt", "words\n");
  test::write_file(scratch / "books/b", "more words\n");
  std::filesystem::create_directories(scratch / "mega");
  std::filesystem::create_directories(scratch / "llmc");
  test::write_megatron(scratch / "mega/part-0", {{{1, 2}}}, 8);
  test::write_megatron(scratch / "mega/part-1", {{{3}}}, 8);
  test::write_llmc(scratch / "llmc/val_000000.bin", {50256, 5}, false);
  // A dataset card is text: beside JSONL it is refused as the same files named together are,
  // and --include takes the JSONL alone. Files that are not text are passed over, and told.
  test::expect_user_error([&] { detected({scratch / "hf"}); },
                          {scratch / "hf/data/train.jsonl", scratch / "hf/README.md", "--include '*.jsonl*'"});
  test::expect_user_error([&] { detected({scratch / "hf/data/train.jsonl", scratch / "hf/README.md"}); },
                          {"is jsonl", "is text", "--include '*.jsonl*'"});
  EXPECT_EQ(detected({scratch / "hf"}, {{"*.jsonl*"}, {}}), "jsonl");
  test::write_file(scratch / "tables/train.jsonl", "{\"text\": \"a\"}\n");
  test::write_file(scratch / "tables/train.parquet", std::string("PAR1\0\0", 6));
  const DetectedFormat tables = detect_input_format({scratch / "tables"}, {});
  EXPECT_NE(tables.reason.find("1 .jsonl file (its 1 other files are not read)"), std::string::npos) << tables.reason;
  EXPECT_EQ(detected({scratch / "books"}), "text");
  EXPECT_EQ(detected({scratch / "mega"}), "megatron");
  EXPECT_EQ(detected({scratch / "llmc"}), "llmc");
  // Excluded files have no say.
  EXPECT_EQ(detected({scratch / "hf"}, {{}, {"*.jsonl"}}), "text");
  EXPECT_EQ(detected({scratch / "hf"}, {{"*.md"}, {}}), "text");

  ConvertOptions options;
  options.inputs = {scratch / "books"};
  options.output_dir = scratch / "dataset";
  options.val_fraction = 0;
  convert_dataset(options);
  EXPECT_EQ(detected({scratch / "dataset"}), "shards");
}

TEST(DataInputFormat, InputsThatDisagreeOrCannotBeToldAreRefused) {
  test::ScratchDir scratch;
  test::write_file(scratch / "a.jsonl", "{\"text\": \"a\"}\n");
  test::write_file(scratch / "b.txt", "b\n");
  test::write_file(scratch / "weights.bin", std::string(2048, '\x01'));
  test::write_file(scratch / "blob", std::string("\x89PNG\r\n\x1a\n\0\0", 10));
  test::write_file(scratch / "mixed/x.jsonl", "{\"text\": \"x\"}\n");
  test::write_llmc(scratch / "mixed/y.bin", {50256, 1}, false);  // write_file made mixed/
  test::expect_user_error([&] { detected({scratch / "a.jsonl", scratch / "b.txt"}); },
                          {"a.jsonl is jsonl", "b.txt is text", "--format"});
  test::expect_user_error([&] { detected({scratch / "weights.bin"}); },
                          {"cannot tell the format of " + scratch / "weights.bin", "llm.c", "Megatron", "--format"});
  test::expect_user_error([&] { detected({scratch / "blob"}); },
                          {"cannot tell the format of " + scratch / "blob", "not text", "--format"});
  test::expect_user_error([&] { detected({scratch / "mixed"}); },
                          {"cannot tell the format of " + scratch / "mixed", ".jsonl file", "llm.c shard", "--format"});
  test::expect_user_error([&] { detected({scratch / "missing.txt"}); }, {"missing.txt does not exist"});
  // Through a conversion: nothing is written.
  ConvertOptions options;
  options.inputs = {scratch / "a.jsonl", scratch / "b.txt"};
  options.output_dir = scratch / "out";
  test::expect_user_error([&] { convert_dataset(options); }, {"--format"});
  EXPECT_FALSE(std::filesystem::exists(scratch / "out"));
  options.format = "text";  // the way out: say it
  EXPECT_EQ(convert_dataset(options).documents, 2);
}

TEST(DataInputFormat, TokenizerTrainingDetectsJsonlAndRefusesTokenIds) {
  test::ScratchDir scratch;
  std::string jsonl;
  for (int i = 0; i < 200; ++i) jsonl += fmt::format("{{\"text\": \"line {} of the corpus, with words\"}}\n", i);
  test::write_file(scratch / "corpus.jsonl", jsonl);
  TokenizerTrainOptions options;
  options.inputs = {scratch / "corpus.jsonl"};
  options.output = scratch / "tok.model";
  options.vocab_size = 300;
  std::vector<std::string> messages;
  const TokenizerTrainReport report =
      train_tokenizer(options, [&](const std::string& line) { messages.push_back(line); });
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages.front().find("input format jsonl"), std::string::npos) << messages.front();
  EXPECT_EQ(report.lines_read, 200);
  // Read as JSONL, the training text is the field's alone: no '{' was seen, so it has no
  // piece of its own (only the byte piece <0x7B>); read as text, every line starts with one.
  const auto model = open_tokenizer(scratch / "tok.model");
  for (std::int32_t id = 0; id < model->vocab_size(); ++id) EXPECT_NE(model->piece(id), "{") << id;

  test::write_llmc(scratch / "ids.bin", {50256, 1, 2}, false);
  options.inputs = {scratch / "ids.bin"};
  options.output = scratch / "tok2.model";
  test::expect_user_error([&] { train_tokenizer(options); }, {"reads text or JSONL", "llmc", "ids.bin"});
}

}  // namespace
}  // namespace ustrain
