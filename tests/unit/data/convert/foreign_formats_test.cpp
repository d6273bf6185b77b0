// Other tools' token files convert to exactly the tokens and document boundaries they hold,
// and every malformed one fails with a message naming the file.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/convert/convert.h"
#include "data/shards/dataset.h"
#include "tests/unit/data/convert/foreign_writers.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;
using Documents = std::vector<std::vector<std::int32_t>>;

ConvertOptions ids_options(const std::string& format, const std::vector<std::string>& inputs, const std::string& output) {
  ConvertOptions options;
  options.format = format;
  options.inputs = inputs;
  options.output_dir = output;
  options.tokenizer = "gpt2";
  options.vocab_size = 50257;
  options.val_fraction = 0;
  options.shard_tokens = 5;  // documents cross shards
  return options;
}

Documents converted(const ConvertOptions& options) {
  convert_dataset(options);
  return test::read_token_documents(TokenDataset::open(options.output_dir), Split::train);
}

// Documents of varied lengths with ids up to 50256.
Documents sample_documents() {
  return {{464, 2068, 7586}, {50256}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {40000, 65}, {0}};
}

test::Ids widen(const std::vector<std::int32_t>& ids) { return test::Ids(ids.begin(), ids.end()); }

TEST(DataForeignFormats, MegatronDocumentsAndTokensAreKept) {
  test::ScratchDir scratch;
  const Documents documents = sample_documents();
  // Document 2 is stored as three sequences; the others as one.
  std::vector<std::vector<test::Ids>> layout;
  for (std::size_t d = 0; d < documents.size(); ++d) {
    const test::Ids ids = widen(documents[d]);
    if (d == 2) layout.push_back({test::Ids(ids.begin(), ids.begin() + 4), test::Ids(ids.begin() + 4, ids.begin() + 5),
                                  test::Ids(ids.begin() + 5, ids.end())});
    else layout.push_back({ids});
  }
  for (int code : {8, 4, 5}) {  // u16, i32, i64
    const std::string prefix = scratch / ("m" + std::to_string(code));
    test::write_megatron(prefix, layout, code);
    EXPECT_EQ(converted(ids_options("megatron", {prefix}, prefix + "-out")), documents) << "dtype " << code;
  }
  // A directory input finds every .idx below it; .bin names the same dataset.
  EXPECT_EQ(converted(ids_options("megatron", {scratch / "m8.bin"}, scratch / "by-bin")), documents);
  const TokenDataset dataset = TokenDataset::open(scratch / "by-bin");
  EXPECT_EQ(dataset.tokenizer().kind, "external");
  EXPECT_EQ(dataset.tokenizer().name, "gpt2");
  EXPECT_EQ(dataset.vocab_size(), 50257);
  EXPECT_EQ(dataset.eos_id(), -1);  // none was given
  // Small ids fit a u8 dataset; the vocabulary decides the stored width, not the input's.
  test::write_megatron(scratch / "bytes", {{{1, 2, 3}}, {{200}}}, 1);
  ConvertOptions small = ids_options("megatron", {scratch / "bytes"}, scratch / "bytes-out");
  small.tokenizer = "byte";
  small.vocab_size = 0;
  EXPECT_EQ(converted(small), (Documents{{1, 2, 3}, {200}}));
}

TEST(DataForeignFormats, MegatronFilesThatAreWrongSayWhat) {
  test::ScratchDir scratch;
  const std::string prefix = scratch / "m";
  test::write_megatron(prefix, {{{1, 2, 3}}, {{4, 5}}}, 8);
  std::string idx = test::read_file(prefix + ".idx");
  test::write_file(prefix + ".idx", idx.substr(0, idx.size() - 3));
  test::expect_user_error([&] { convert_dataset(ids_options("megatron", {prefix}, scratch / "o1")); },
                          {prefix + ".idx", "bytes"});
  test::write_file(prefix + ".idx", "NOTMEGATRON" + idx.substr(11));
  test::expect_user_error([&] { convert_dataset(ids_options("megatron", {prefix}, scratch / "o2")); },
                          {prefix + ".idx", "magic"});
  test::write_megatron(prefix, {{{1, 2, 3}}, {{4, 60000}}}, 8);
  test::expect_user_error([&] { convert_dataset(ids_options("megatron", {prefix}, scratch / "o3")); },
                          {prefix + ".bin", "token id 60000", "position 4", "vocabulary of size 50257"});
  test::write_megatron(prefix, {{{1, 2, 3}}}, 7);
  test::expect_user_error([&] { convert_dataset(ids_options("megatron", {prefix}, scratch / "o4")); },
                          {prefix + ".idx", "floating-point"});
  test::write_megatron(prefix, {{{1, 2, 3}}, {{4, 5}}}, 8);
  test::write_file(prefix + ".bin", test::read_file(prefix + ".bin").substr(0, 6));
  test::expect_user_error([&] { convert_dataset(ids_options("megatron", {prefix}, scratch / "o5")); },
                          {prefix + ".bin", "truncated"});
  test::expect_user_error([&] { convert_dataset(ids_options("megatron", {scratch / "absent"}, scratch / "o6")); },
                          {"absent.idx"});
  for (const char* out : {"o1", "o2", "o3", "o4", "o5", "o6"}) EXPECT_FALSE(fs::exists(scratch / out)) << out;
}

TEST(DataForeignFormats, LlmcDocumentsStartAtEachEotAcrossFiles) {
  test::ScratchDir scratch;
  // As llm.c writes them: EOT (50256) first in each document; the last document of the first
  // file continues in the second.
  test::write_llmc(scratch / "shard_000.bin", {50256, 10, 11, 50256, 20, 21, 22, 50256, 30}, false);
  test::write_llmc(scratch / "shard_001.bin", {31, 32, 50256, 40}, false);
  const Documents expected = {{50256, 10, 11}, {50256, 20, 21, 22}, {50256, 30, 31, 32}, {50256, 40}};
  ConvertOptions options = ids_options("llmc", {scratch / "shard_000.bin", scratch / "shard_001.bin"}, scratch / "out");
  options.tokenizer = "gpt2";
  EXPECT_EQ(converted(options), expected);
  EXPECT_EQ(TokenDataset::open(scratch / "out").eos_id(), 50256);  // llm.c's default
  // A directory reads its .bin files in sorted order; other files are skipped.
  test::write_file(scratch / "README", "not a shard");
  EXPECT_EQ(converted(ids_options("llmc", {scratch.path().string()}, scratch / "dir")), expected);
}

TEST(DataForeignFormats, LlmcUint32VariantKeepsLargeIds) {
  test::ScratchDir scratch;
  test::write_llmc(scratch / "llama.bin", {128000, 9906, 1917, 128000, 100000}, true);
  ConvertOptions options = ids_options("llmc", {scratch / "llama.bin"}, scratch / "out");
  options.tokenizer = "llama3";
  options.vocab_size = 128256;
  options.eos_id = 128000;
  EXPECT_EQ(converted(options), (Documents{{128000, 9906, 1917}, {128000, 100000}}));
  const auto manifest = nlohmann::json::parse(test::read_file(scratch / "out/manifest.json"));
  EXPECT_EQ(manifest["token_dtype"], "uint32");
}

TEST(DataForeignFormats, LlmcFilesThatAreWrongSayWhat) {
  test::ScratchDir scratch;
  test::write_llmc(scratch / "a.bin", {1, 2, 3}, false);
  std::string bytes = test::read_file(scratch / "a.bin");
  test::write_file(scratch / "short.bin", bytes.substr(0, bytes.size() - 2));
  test::expect_user_error([&] { convert_dataset(ids_options("llmc", {scratch / "short.bin"}, scratch / "o1")); },
                          {"short.bin", "truncated"});
  bytes[0] = 7;
  test::write_file(scratch / "magic.bin", bytes);
  test::expect_user_error([&] { convert_dataset(ids_options("llmc", {scratch / "magic.bin"}, scratch / "o2")); },
                          {"magic.bin", "magic"});
  ConvertOptions unnamed = ids_options("llmc", {scratch / "a.bin"}, scratch / "o3");
  unnamed.tokenizer.clear();
  test::expect_user_error([&] { convert_dataset(unnamed); }, {"--tokenizer gpt2 --vocab-size 50257"});
  ConvertOptions no_vocab = ids_options("llmc", {scratch / "a.bin"}, scratch / "o4");
  no_vocab.vocab_size = 0;
  test::expect_user_error([&] { convert_dataset(no_vocab); }, {"--vocab-size", "gpt2"});
}

TEST(DataForeignFormats, NpyStreamsSplitAtEosAndRowsAreDocuments) {
  test::ScratchDir scratch;
  const test::Ids stream = {5, 6, 50256, 7, 50256, 8, 9};
  const Documents by_eos = {{5, 6, 50256}, {7, 50256}, {8, 9}};
  for (const std::string descr : {"<u2", "<i4", "<u4", "<i8", "<u8"}) {
    for (int major : {1, 2, 3}) {
      const std::string path = scratch / fmt::format("s{}{}.npy", descr.substr(1), major);
      test::write_npy(path, descr, {stream.size()}, stream, major);
      ConvertOptions options = ids_options("npy", {path}, path + "-out");
      options.eos_id = 50256;
      EXPECT_EQ(converted(options), by_eos) << descr << " v" << major;
    }
  }
  // Without an EOS id the whole stream is one document; |u1 needs a small vocabulary.
  test::write_npy(scratch / "bytes.npy", "|u1", {4}, {104, 105, 0, 255});
  ConvertOptions bytes = ids_options("npy", {scratch / "bytes.npy"}, scratch / "bytes");
  bytes.tokenizer = "byte";
  bytes.vocab_size = 0;
  EXPECT_EQ(converted(bytes), (Documents{{104, 105, 0, 255}}));
  // 2-D: each row a document.
  test::write_npy(scratch / "rows.npy", "<i4", {3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(converted(ids_options("npy", {scratch / "rows.npy"}, scratch / "rows")), (Documents{{1, 2}, {3, 4}, {5, 6}}));
}

TEST(DataForeignFormats, NpyFilesThatCannotBeReadSayWhy) {
  test::ScratchDir scratch;
  const auto fails = [&](const std::string& name, const std::vector<std::string>& fragments) {
    test::expect_user_error([&] { convert_dataset(ids_options("npy", {scratch / name}, scratch / (name + "-out"))); },
                            fragments);
  };
  test::write_npy(scratch / "big.npy", ">u4", {2}, {1, 2});
  fails("big.npy", {"big.npy", "big-endian", "astype"});
  test::write_npy(scratch / "fortran.npy", "<u2", {2, 2}, {1, 2, 3, 4}, 1, true);
  fails("fortran.npy", {"fortran.npy", "Fortran", "ascontiguousarray"});
  test::write_npy(scratch / "float.npy", "<f4", {2}, {0, 0});
  fails("float.npy", {"float.npy", "'<f4'", "integers"});
  test::write_npy(scratch / "cube.npy", "<u2", {1, 1, 2}, {1, 2});
  fails("cube.npy", {"cube.npy", "shape"});
  test::write_npy(scratch / "cut.npy", "<u2", {4}, {1, 2, 3, 4});
  test::write_file(scratch / "cut.npy", test::read_file(scratch / "cut.npy").substr(0, 70));
  fails("cut.npy", {"cut.npy", "truncated"});
  test::write_file(scratch / "text.npy", "just some text that is long enough");
  fails("text.npy", {"text.npy", "magic"});
  // (2**61 + 10,) int64 elements wrap around to 80 bytes, which the file then holds.
  test::write_npy(scratch / "huge.npy", "<i8", {(std::uint64_t{1} << 61) + 10}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  fails("huge.npy", {"huge.npy", "2305843009213693962", "more elements than any file holds"});
  // A negative extent is a damaged header, not a huge shape.
  test::write_npy(scratch / "minus.npy", "<u2", {3}, {1, 2, 3});
  std::string minus = test::read_file(scratch / "minus.npy");
  ASSERT_NE(minus.find("(3,)"), std::string::npos);
  minus.replace(minus.find("(3,)"), 4, "(-3)");  // the same length: the header stays aligned
  test::write_file(scratch / "minus.npy", minus);
  fails("minus.npy", {"minus.npy", "(-3)", "not a whole number >= 0"});
  test::write_npy(scratch / "negative.npy", "<i4", {3}, {1, -5, 2});
  fails("negative.npy", {"negative.npy", "token id -5", "position 1"});
}

TEST(DataForeignFormats, EosCanBeAppendedToTokenDocuments) {
  test::ScratchDir scratch;
  test::write_npy(scratch / "rows.npy", "<u2", {2, 2}, {1, 9, 3, 4});
  ConvertOptions options = ids_options("npy", {scratch / "rows.npy"}, scratch / "out");
  options.eos_id = 9;
  options.eos = EosMode::append;
  // Appended unless the document already ends with it.
  EXPECT_EQ(converted(options), (Documents{{1, 9}, {3, 4, 9}}));
  options.eos_id = -1;
  options.output_dir = scratch / "out2";
  test::expect_user_error([&] { convert_dataset(options); }, {"no end-of-document id", "--eos-id"});
}

// Megatron stores an EOS only when its maker appended one; --eos auto keeps the ids, so a
// conversion whose documents lack the tokenizer's EOS says they would run together.
TEST(DataForeignFormats, MegatronDocumentsWithoutEosAreReported) {
  test::ScratchDir scratch;
  test::write_megatron(scratch / "plain", {{{464, 2068}}, {{7586}}, {{1, 2, 50256}}}, 8);
  ConvertOptions options = ids_options("megatron", {scratch / "plain"}, scratch / "out");
  options.eos_id = 50256;
  std::vector<std::string> messages;
  const auto collect = [&](const std::string& line) { messages.push_back(line); };
  convert_dataset(options, collect);
  const auto note = [&] {
    for (const std::string& line : messages)
      if (line.find("do not end with the EOS") != std::string::npos) return line;
    return std::string();
  };
  EXPECT_NE(note().find("2 of the 3 documents do not end with the EOS id 50256"), std::string::npos) << note();
  EXPECT_NE(note().find("--eos append"), std::string::npos) << note();
  // Following the advice separates them; saying --eos none, or documents that end with EOS,
  // or a tokenizer without a known EOS, give no note.
  messages.clear();
  options.eos = EosMode::append;
  options.output_dir = scratch / "appended";
  convert_dataset(options, collect);
  EXPECT_EQ(test::read_token_documents(TokenDataset::open(scratch / "appended"), Split::train),
            (Documents{{464, 2068, 50256}, {7586, 50256}, {1, 2, 50256}}));
  options.eos = EosMode::none;
  options.output_dir = scratch / "none";
  convert_dataset(options, collect);
  test::write_megatron(scratch / "ended", {{{464, 50256}}, {{7586, 50256}}}, 8);
  options = ids_options("megatron", {scratch / "ended"}, scratch / "ended-out");
  options.eos_id = 50256;
  convert_dataset(options, collect);
  options = ids_options("megatron", {scratch / "plain"}, scratch / "unknown-eos");
  convert_dataset(options, collect);
  EXPECT_EQ(note(), "");
}

}  // namespace
}  // namespace ustrain
