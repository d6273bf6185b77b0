// Reading shards without HDF5 (memory maps at the offsets HDF5 reports) gives exactly what
// HDF5 reads, for plain and compressed shards; damage is caught when the data is opened.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/convert/convert.h"
#include "data/files/crc32.h"
#include "data/shards/dataset.h"
#include "data/shards/mapped_shard.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

// ~1.2 MB of varied text: with 700000-token shards, reads cross chunk (524288 tokens) and
// shard boundaries.
std::string varied_text() {
  std::string text;
  for (int i = 0; i < 24000; ++i)
    text += "line " + std::to_string(i * 7919 % 10007) + " of the corpus, \xC3\xA9t\xC3\xA9 " + std::to_string(i) + "\n\n";
  return text;
}

std::string convert(const test::ScratchDir& scratch, const std::string& name, int compression) {
  test::write_file(scratch / "in.txt", varied_text());
  ConvertOptions options;
  options.inputs = {scratch / "in.txt"};
  options.output_dir = scratch / name;
  options.shard_tokens = 700000;
  options.compression = compression;
  options.val_fraction = 0.1;
  convert_dataset(options);
  return options.output_dir;
}

std::vector<std::int32_t> read_mapped(const ShardedTokens& tokens, std::int64_t first, std::int64_t count) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(count));
  tokens.read(first, count, out.data());
  return out;
}

void expect_mapped_equals_hdf5(const std::string& dir) {
  const TokenDataset dataset = TokenDataset::open(dir);
  for (Split split : {Split::train, Split::val}) {
    const std::vector<std::int32_t> reference = dataset.read_all(split);
    const auto mapped = dataset.open_tokens(split);
    ASSERT_EQ(mapped->size(), static_cast<std::int64_t>(reference.size()));
    EXPECT_EQ(read_mapped(*mapped, 0, mapped->size()), reference);
    // Short reads at awkward places: chunk and shard boundaries, the very end.
    for (std::int64_t first : {std::int64_t{0}, std::int64_t{524286}, std::int64_t{524288}, std::int64_t{699999},
                               std::int64_t{700000}, mapped->size() - 3}) {
      if (first < 0 || first + 3 > mapped->size()) continue;
      EXPECT_EQ(read_mapped(*mapped, first, 3),
                std::vector<std::int32_t>(reference.begin() + first, reference.begin() + first + 3))
          << "at " << first;
    }
  }
}

TEST(DataMapped, PlainShardsReadLikeHdf5) {
  test::ScratchDir scratch;
  expect_mapped_equals_hdf5(convert(scratch, "plain", 0));
}

TEST(DataMapped, CompressedShardsReadLikeHdf5AndAreSmaller) {
  test::ScratchDir scratch;
  const std::string plain = convert(scratch, "plain", 0);
  const std::string packed = convert(scratch, "packed", 6);
  expect_mapped_equals_hdf5(packed);
  EXPECT_TRUE(TokenDataset::open(packed).open_tokens(Split::train)->shards()[0]->in_memory());
  EXPECT_FALSE(TokenDataset::open(plain).open_tokens(Split::train)->shards()[0]->in_memory());
  const TokenDataset a = TokenDataset::open(plain), b = TokenDataset::open(packed);
  EXPECT_EQ(b.compression(), "deflate:6");
  EXPECT_LT(b.shards(Split::train)[0].bytes, a.shards(Split::train)[0].bytes / 2);
  EXPECT_EQ(a.read_all(Split::train), b.read_all(Split::train));
}

TEST(DataMapped, ConversionIsReproducibleByteForByte) {
  test::ScratchDir scratch;
  const TokenDataset a = TokenDataset::open(convert(scratch, "a", 0));
  const TokenDataset b = TokenDataset::open(convert(scratch, "b", 0));
  ASSERT_EQ(a.shards(Split::train).size(), b.shards(Split::train).size());
  for (std::size_t i = 0; i < a.shards(Split::train).size(); ++i)
    EXPECT_EQ(a.shards(Split::train)[i].checksum, b.shards(Split::train)[i].checksum);
}

TEST(DataMapped, VerifyChecksumsNamesTheDamagedShard) {
  test::ScratchDir scratch;
  const std::string dir = convert(scratch, "d", 0);
  const TokenDataset dataset = TokenDataset::open(dir);
  EXPECT_NO_THROW(dataset.verify_checksums(Split::train, 2));
  const std::string path = dataset.shard_path(dataset.shards(Split::train)[1]);
  std::string bytes = test::read_file(path);
  bytes[bytes.size() - 10] ^= 0x01;
  test::write_file(path, bytes);
  test::expect_user_error([&] { dataset.verify_checksums(Split::train, 2); }, {path, "fails its checksum"});
}

TEST(DataMapped, IdOutsideTheVocabularyFailsTheRead) {
  test::ScratchDir scratch;
  const std::string dir = convert(scratch, "d", 0);
  const TokenDataset dataset = TokenDataset::open(dir);
  const std::string path = dataset.shard_path(dataset.shards(Split::train)[0]);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t tokens = H5Dopen2(file, "tokens", H5P_DEFAULT);
  const hid_t space = H5Dget_space(tokens);
  const hsize_t position = 100, one = 1;
  H5Sselect_hyperslab(space, H5S_SELECT_SET, &position, nullptr, &one, nullptr);
  const hid_t memory = H5Screate_simple(1, &one, nullptr);
  const std::uint16_t bad = 4000;
  ASSERT_GE(H5Dwrite(tokens, H5T_NATIVE_UINT16, memory, space, H5P_DEFAULT, &bad), 0);
  H5Sclose(memory);
  H5Sclose(space);
  H5Dclose(tokens);
  H5Fclose(file);
  const auto mapped = TokenDataset::open(dir).open_tokens(Split::train);
  EXPECT_NO_THROW(read_mapped(*mapped, 0, 100));
  test::expect_user_error([&] { read_mapped(*mapped, 90, 20); }, {path, "token id 4000", "position 100", "size 257"});
}

TEST(DataMapped, FormatOneZeroManifestsStillOpen) {
  test::ScratchDir scratch;
  const std::string dir = convert(scratch, "d", 0);
  auto manifest = nlohmann::json::parse(test::read_file(dir + "/manifest.json"));
  manifest.erase("format_minor");
  manifest.erase("compression");
  manifest["tokenizer"].erase("kind");
  test::write_file(dir + "/manifest.json", manifest.dump());
  const TokenDataset dataset = TokenDataset::open(dir);
  EXPECT_EQ(dataset.tokenizer().kind, "byte");
  EXPECT_EQ(dataset.format_minor(), 0);
  const std::vector<std::int32_t> val = dataset.read_all(Split::val);
  EXPECT_EQ(read_mapped(*dataset.open_tokens(Split::val), 0, 5), std::vector<std::int32_t>(val.begin(), val.begin() + 5));
}

TEST(DataMapped, ShardOfAnotherTokenizerIsRefusedWhenOpened) {
  test::ScratchDir scratch;
  const std::string dir = convert(scratch, "d", 0);
  auto manifest = nlohmann::json::parse(test::read_file(dir + "/manifest.json"));
  manifest["tokenizer"] = {{"kind", "external"}, {"name", "gpt2"}, {"vocab_size", 257}, {"eos_id", 256}};
  test::write_file(dir + "/manifest.json", manifest.dump());
  const TokenDataset dataset = TokenDataset::open(dir);
  test::expect_user_error([&] { dataset.open_tokens(Split::train); },
                          {dir + "/train-00000.h5", "written for tokenizer byte", "says gpt2"});
}

TEST(DataMapped, ShardsReadableByH5dumpUnderTheDocumentedNames) {
  if (std::system("command -v h5dump > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "h5dump not found on PATH (install hdf5-tools); cannot check shards with it";
  test::ScratchDir scratch;
  const std::string dir = convert(scratch, "d", 6);
  const std::string shard = dir + "/val-00000.h5", listing = scratch / "dump.txt";
  const std::string command = "h5dump -H '" + shard + "' > '" + listing + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << test::read_file(listing);
  const std::string text = test::read_file(listing);
  for (const char* name : {"DATASET \"tokens\"", "DATASET \"doc_offsets\"", "H5T_STD_U16LE", "H5T_STD_U64LE",
                           "ATTRIBUTE \"format_version\"", "ATTRIBUTE \"format_minor\"", "ATTRIBUTE \"tokenizer\"",
                           "ATTRIBUTE \"tokenizer_kind\"", "ATTRIBUTE \"vocab_size\"", "ATTRIBUTE \"eos_id\"",
                           "ATTRIBUTE \"source\"", "ATTRIBUTE \"token_count\""})
    EXPECT_NE(text.find(name), std::string::npos) << name << " missing in:\n" << text;
  // The compressed data itself decodes with the standard tool.
  const std::string values = scratch / "values.txt";
  const std::string dump = "h5dump -d /tokens -s 0 -c 4 '" + shard + "' > '" + values + "' 2>&1";
  ASSERT_EQ(std::system(dump.c_str()), 0) << test::read_file(values);
  const TokenDataset dataset = TokenDataset::open(dir);
  const std::vector<std::int32_t> first = dataset.read_all(Split::val);
  EXPECT_NE(test::read_file(values).find(fmt::format("{}, {}, {}, {}", first[0], first[1], first[2], first[3])),
            std::string::npos)
      << test::read_file(values);
}

}  // namespace
}  // namespace ustrain
