// Tokenizers: the byte tokenizer, sentencepiece models trained by `data tokenizer train` and
// by users, round trips text -> shards -> text, and the tokenizer a dataset carries with it.
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/tokenizers/byte_tokenizer.h"
#include "data/shards/dataset_tokenizer.h"
#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "data/shards/shard_file.h"
#include "data/convert/tokenizer_training.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

// Documents with what a lossless tokenizer must keep: newlines, tabs, runs of spaces,
// digits, accents, CJK and emoji, and characters the model never saw in training.
std::vector<std::string> tricky_documents() {
  static const char* const kWords[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "river",
                                       "mountain", "language", "model", "training", "data", "history", "music",
                                       "science", "theory", "energy", "question", "children", "between", "through",
                                       "important", "different", "number", "following", "research", "century"};
  constexpr std::size_t kCount = sizeof kWords / sizeof kWords[0];
  std::vector<std::string> documents;
  for (std::size_t i = 0; i < 300; ++i) {
    std::string text = "Document " + std::to_string(i) + ":";
    for (std::size_t w = 0; w < 12; ++w) text += (w % 5 == 4 ? "  " : " ") + std::string(kWords[(i * 7 + w * w * 3 + i * w) % kCount]);
    text += "\n\t" + std::to_string(i * 37) + " times.\nCaf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80  \n";
    documents.push_back(text);
  }
  documents.push_back("Unseen: \xE2\x88\x80x \xE2\x88\x83y \xCE\xBB\xCE\xBB \xD0\x96\n");
  return documents;
}

std::string as_blank_line_corpus(const std::vector<std::string>& documents) {
  std::string text;
  for (const std::string& document : documents) text += document + "\n";
  return text;
}

std::string train_model(const test::ScratchDir& scratch, std::int64_t vocab, const std::string& type = "bpe") {
  test::write_file(scratch / "corpus.txt", as_blank_line_corpus(tricky_documents()));
  TokenizerTrainOptions options;
  options.inputs = {scratch / "corpus.txt"};
  options.output = scratch / ("tok-" + type + ".model");
  options.vocab_size = vocab;
  options.model_type = type;
  train_tokenizer(options);
  return options.output;
}

// Each document of the split decoded with the dataset's own tokenizer, EOS dropped.
std::vector<std::string> decoded_documents(const std::string& dir, Split split) {
  const TokenDataset dataset = TokenDataset::open(dir);
  const auto tokenizer = open_dataset_tokenizer(dir);
  const std::vector<std::int32_t> tokens = dataset.read_all(split);
  std::vector<std::string> documents;
  std::size_t base = 0, start = 0;
  std::vector<std::size_t> starts;
  for (const ShardInfo& shard : dataset.shards(split)) {
    const auto offsets = read_shard_doc_offsets(dataset.shard_path(shard));
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i) starts.push_back(base + offsets[i]);
    base += static_cast<std::size_t>(shard.tokens);
  }
  starts.push_back(tokens.size());
  for (std::size_t d = 0; d + 1 < starts.size(); ++d) {
    start = starts[d];
    std::size_t end = starts[d + 1];
    EXPECT_EQ(tokens[end - 1], tokenizer->eos_id()) << "document " << d << " does not end with EOS";
    documents.push_back(tokenizer->decode(std::span<const std::int32_t>(tokens).subspan(start, end - 1 - start)));
  }
  return documents;
}

TEST(DataTokenizer, ByteTokenizerIsLosslessAndDropsEosWhenDecoding) {
  const ByteTokenizer tokenizer;
  const std::string text("a\0\xFF\n\xC3\xA9", 6);
  const std::vector<std::int32_t> ids = tokenizer.encode(text);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{'a', 0, 255, '\n', 0xC3, 0xA9}));
  std::vector<std::int32_t> with_eos = ids;
  with_eos.push_back(ByteTokenizer::kEos);
  EXPECT_EQ(tokenizer.decode(with_eos), text);
  EXPECT_EQ(tokenizer.piece(ByteTokenizer::kEos), "<eos>");
  EXPECT_EQ(tokenizer.piece('\n'), "<0x0A>");
  EXPECT_EQ(tokenizer.piece('q'), "q");
  EXPECT_EQ(open_tokenizer("byte")->identity(), "byte");
}

TEST(DataTokenizer, TrainedModelHasTheRequestedVocabularyAndSpecials) {
  test::ScratchDir scratch;
  for (const std::string type : {"bpe", "unigram"}) {
    const SentencePieceTokenizer tokenizer(train_model(scratch, 360, type));
    EXPECT_EQ(tokenizer.vocab_size(), 360) << type;
    EXPECT_EQ(tokenizer.eos_id(), 1) << type;
    EXPECT_EQ(tokenizer.piece(1), "<eos>");
    EXPECT_EQ(tokenizer.identity(), "sentencepiece");
    // Frequent words merge into pieces: fewer ids than bytes.
    const std::string text = "the quick brown fox jumps over the lazy dog";
    EXPECT_LT(tokenizer.encode(text).size(), text.size() * 2 / 3) << type;
  }
}

TEST(DataTokenizer, SentencepieceRoundTripIsLossless) {
  test::ScratchDir scratch;
  const std::string model = train_model(scratch, 420);
  const std::vector<std::string> documents = tricky_documents();
  test::write_file(scratch / "docs.txt", as_blank_line_corpus(documents));
  for (int workers : {1, 3}) {
    ConvertOptions options;
    options.inputs = {scratch / "docs.txt"};
    options.output_dir = scratch / ("out-" + std::to_string(workers));
    options.tokenizer = model;
    options.val_fraction = 0;
    options.workers = workers;
    options.shard_tokens = 2000;  // documents cross shards
    convert_dataset(options);
    // The blank-line split keeps each document's bytes up to its blank line.
    EXPECT_EQ(decoded_documents(options.output_dir, Split::train), documents) << workers << " workers";
  }
  const TokenDataset one = TokenDataset::open(scratch / "out-1"), three = TokenDataset::open(scratch / "out-3");
  EXPECT_EQ(one.read_all(Split::train), three.read_all(Split::train));
}

TEST(DataTokenizer, DatasetCarriesItsModel) {
  test::ScratchDir scratch;
  const std::string model = train_model(scratch, 400);
  test::write_file(scratch / "docs.txt", "one document\n\nanother one\n");
  ConvertOptions options;
  options.inputs = {scratch / "docs.txt"};
  options.output_dir = scratch / "out";
  options.tokenizer = model;
  options.val_fraction = 0;
  convert_dataset(options);
  fs::remove(model);  // the dataset is self-contained
  const TokenDataset dataset = TokenDataset::open(options.output_dir);
  EXPECT_EQ(dataset.tokenizer().kind, "sentencepiece");
  EXPECT_EQ(dataset.tokenizer().model_file, "tokenizer.model");
  EXPECT_EQ(dataset.vocab_size(), 400);
  EXPECT_EQ(dataset.eos_id(), 1);
  EXPECT_EQ(open_dataset_tokenizer(options.output_dir)->decode(dataset.read_all(Split::train)), "one document\nanother one\n");
  const ShardHeader header = read_shard_header(dataset.shard_path(dataset.shards(Split::train)[0]));
  EXPECT_EQ(header.tokenizer.model_checksum, dataset.tokenizer().model_checksum);

  // A damaged or missing model is caught, naming the file.
  const std::string copied = options.output_dir + "/tokenizer.model";
  std::string bytes = test::read_file(copied);
  bytes[bytes.size() / 2] ^= 0x20;
  test::write_file(copied, bytes);
  test::expect_user_error([&] { open_dataset_tokenizer(options.output_dir); }, {copied, "checksum"});
  test::expect_user_error([&] { dataset.verify_checksums(Split::train); }, {copied, "checksum"});
  fs::remove(copied);
  test::expect_user_error([&] { TokenDataset::open(options.output_dir); }, {copied, "missing"});
}

TEST(DataTokenizer, AUsersModelRoundTripsModuloItsNormalisation) {
  // A model trained the common way: NFKC normalisation, extra whitespace removed.
  test::ScratchDir scratch;
  test::write_file(scratch / "corpus.txt",
                   as_blank_line_corpus(tricky_documents()) + "Hello world, full width text.\n");
  const std::string prefix = scratch / "user";
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + (scratch / "corpus.txt") + " --model_prefix=" + prefix +
      " --vocab_size=200 --model_type=bpe --normalization_rule_name=nmt_nfkc --character_coverage=1.0 --minloglevel=2");
  ASSERT_TRUE(status.ok()) << status.ToString();
  test::write_file(scratch / "docs.txt", "Hello   world\n\n\xEF\xBD\x86\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C width\n");
  ConvertOptions options;
  options.inputs = {scratch / "docs.txt"};
  options.output_dir = scratch / "out";
  options.tokenizer = prefix + ".model";
  options.val_fraction = 0;
  convert_dataset(options);
  // NFKC turns full-width letters into ASCII; runs of spaces and the line ends collapse.
  EXPECT_EQ(decoded_documents(options.output_dir, Split::train), (std::vector<std::string>{"Hello world", "full width"}));
}

TEST(DataTokenizer, BadModelsAndOptionsAreUserErrors) {
  test::ScratchDir scratch;
  test::expect_user_error([&] { open_tokenizer(scratch / "none.model"); }, {scratch / "none.model", "not found"});
  test::write_file(scratch / "junk.model", "not a protobuf");
  test::expect_user_error([&] { SentencePieceTokenizer(scratch / "junk.model"); }, {scratch / "junk.model", "not a readable"});
  test::expect_user_error([&] { open_tokenizer("gpt2"); }, {"gpt2", "neither 'byte' nor"});
  test::write_file(scratch / "tiny.txt", "ab ab ab\n");
  TokenizerTrainOptions options;
  options.inputs = {scratch / "tiny.txt"};
  options.output = scratch / "tiny.model";
  options.vocab_size = 5000;
  test::expect_user_error([&] { train_tokenizer(options); }, {"sentencepiece could not train", "tiny.txt"});
  EXPECT_FALSE(fs::exists(options.output));
  options.vocab_size = 100;
  test::expect_user_error([&] { train_tokenizer(options); }, {"vocab size 100"});
}

// Training can take hours: an output that cannot be written is refused before it starts.
TEST(DataTokenizer, AnOutputInAMissingDirectoryIsRefusedBeforeTraining) {
  test::ScratchDir scratch;
  test::write_file(scratch / "corpus.txt", as_blank_line_corpus(tricky_documents()));
  TokenizerTrainOptions options;
  options.inputs = {scratch / "corpus.txt"};
  options.output = scratch / "models/tok.model";
  options.vocab_size = 400;
  std::vector<std::string> messages;
  test::expect_user_error(
      [&] { train_tokenizer(options, [&](const std::string& line) { messages.push_back(line); }); },
      {"--output " + scratch / "models/tok.model", scratch / "models", "does not exist", "mkdir -p"});
  EXPECT_TRUE(messages.empty()) << messages.front();
  EXPECT_FALSE(fs::exists(scratch / "models"));
}

}  // namespace
}  // namespace ustrain
