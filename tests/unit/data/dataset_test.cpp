// Opening and reading datasets, and every kind of damaged dataset failing with a UserError
// that names the file at fault.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/files/crc32.h"
#include "data/shards/dataset.h"
#include "data/convert/convert.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DataDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 60; ++i) text += "fortune " + std::to_string(i) + "\n%\n";
    test::write_file(scratch_ / "in.txt", text);
    ConvertOptions options;
    options.inputs = {scratch_ / "in.txt"};
    options.output_dir = dir_;
    options.split = "line:%";
    options.val_fraction = 0.3;
    options.shard_tokens = 200;
    convert_dataset(options);
  }

  json manifest() const { return json::parse(test::read_file(manifest_path_)); }
  void save_manifest(const json& m) const {
    std::ofstream(manifest_path_, std::ios::trunc) << m.dump(2);
  }
  std::string shard_path(const char* split, int i) const {
    return dir_ + "/" + manifest()["splits"][split][i]["file"].get<std::string>();
  }
  // After editing a shard in place, records its new size and checksum as a conversion would.
  void refresh_shard_entry(const char* split, int i) const {
    json m = manifest();
    const std::string path = shard_path(split, i);
    m["splits"][split][i]["bytes"] = fs::file_size(path);
    m["splits"][split][i]["checksum"] = crc32_label(crc32_of_file(path));
    save_manifest(m);
  }

  test::ScratchDir scratch_;
  const std::string dir_ = scratch_ / "data";
  const std::string manifest_path_ = dir_ + "/manifest.json";
};

TEST_F(DataDataset, OpenReportsTheManifest) {
  const TokenDataset dataset = TokenDataset::open(dir_);
  EXPECT_EQ(dataset.dir(), dir_);
  EXPECT_EQ(dataset.tokenizer().name, "byte");
  EXPECT_EQ(dataset.tokenizer().kind, "byte");
  EXPECT_EQ(dataset.vocab_size(), 257);
  EXPECT_EQ(dataset.eos_id(), 256);
  const json m = manifest();
  for (Split split : {Split::train, Split::val}) {
    const json& listed = m["splits"][split_name(split)];
    ASSERT_EQ(dataset.shards(split).size(), listed.size());
    std::int64_t tokens = 0;
    for (std::size_t i = 0; i < listed.size(); ++i) {
      EXPECT_EQ(dataset.shards(split)[i].file, listed[i]["file"]);
      EXPECT_EQ(dataset.shards(split)[i].checksum, listed[i]["checksum"]);
      tokens += listed[i]["tokens"].get<std::int64_t>();
    }
    EXPECT_EQ(dataset.tokens(split), tokens);
    EXPECT_EQ(dataset.read_all(split).size(), static_cast<std::size_t>(tokens));
  }
  EXPECT_GT(dataset.shards(Split::train).size(), 1u);
  EXPECT_FALSE(dataset.shards(Split::val).empty());
  EXPECT_STREQ(split_name(Split::train), "train");
  EXPECT_STREQ(split_name(Split::val), "val");
}

TEST_F(DataDataset, MissingDirectory) {
  test::expect_user_error([&] { TokenDataset::open(scratch_ / "elsewhere"); }, {scratch_ / "elsewhere", "does not exist"});
}

TEST_F(DataDataset, MissingManifest) {
  fs::remove(manifest_path_);
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {manifest_path_, "not found"});
}

TEST_F(DataDataset, CorruptManifestJson) {
  std::ofstream(manifest_path_, std::ios::trunc) << "{\"format_version\": 1, \"splits\": [";
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {manifest_path_, "not valid JSON"});
}

TEST_F(DataDataset, ManifestFieldOfWrongType) {
  json m = manifest();
  m["splits"]["train"][0]["tokens"] = "many";
  save_manifest(m);
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {manifest_path_, "splits.train[0].tokens"});
}

TEST_F(DataDataset, ManifestShardOutsideTheDirectory) {
  json m = manifest();
  m["splits"]["val"][0]["file"] = "../in.txt";
  save_manifest(m);
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {manifest_path_, "splits.val[0].file"});
}

TEST_F(DataDataset, NewerManifestFormatVersion) {
  json m = manifest();
  m["format_version"] = 2;
  save_manifest(m);
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {manifest_path_, "format_version 2", "upgrade ustrain"});
}

TEST_F(DataDataset, NewerShardFormatVersion) {
  const std::string path = shard_path("train", 1);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t attribute = H5Aopen(file, "format_version", H5P_DEFAULT);
  const int version = 2;
  ASSERT_GE(H5Awrite(attribute, H5T_NATIVE_INT, &version), 0);
  H5Aclose(attribute);
  H5Fclose(file);
  refresh_shard_entry("train", 1);
  const TokenDataset dataset = TokenDataset::open(dir_);
  test::expect_user_error([&] { dataset.read_all(Split::train); }, {path, "format_version 2", "upgrade ustrain"});
}

TEST_F(DataDataset, MissingShard) {
  const std::string path = shard_path("val", 0);
  fs::remove(path);
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {path, "missing"});
}

TEST_F(DataDataset, TruncatedShard) {
  const std::string path = shard_path("train", 0);
  fs::resize_file(path, fs::file_size(path) / 2);
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {path, "truncated"});
}

TEST_F(DataDataset, ShardWithChangedBytesFailsItsChecksum) {
  const std::string path = shard_path("train", 0);
  std::string bytes = test::read_file(path);
  bytes[bytes.size() / 2] ^= 0x5A;
  test::write_file(path, bytes);
  const TokenDataset dataset = TokenDataset::open(dir_);  // same size: only the checksum can tell
  test::expect_user_error([&] { dataset.read_all(Split::train); }, {path, "checksum"});
  EXPECT_NO_THROW(dataset.read_all(Split::val));
}

TEST_F(DataDataset, TokenIdOutsideTheVocabulary) {
  const std::string path = shard_path("val", 0);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t tokens = H5Dopen2(file, "tokens", H5P_DEFAULT);
  const hid_t file_space = H5Dget_space(tokens);
  const hsize_t position = 3, one = 1;
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &position, nullptr, &one, nullptr);
  const hid_t memory_space = H5Screate_simple(1, &one, nullptr);
  const std::uint16_t bad_id = 300;
  ASSERT_GE(H5Dwrite(tokens, H5T_NATIVE_UINT16, memory_space, file_space, H5P_DEFAULT, &bad_id), 0);
  H5Sclose(memory_space);
  H5Sclose(file_space);
  H5Dclose(tokens);
  H5Fclose(file);
  refresh_shard_entry("val", 0);
  const TokenDataset dataset = TokenDataset::open(dir_);
  test::expect_user_error([&] { dataset.read_all(Split::val); }, {path, "token id 300", "vocabulary of size 257"});
}

TEST_F(DataDataset, EmptyTrainSplit) {
  json m = manifest();
  m["splits"]["train"] = json::array();
  save_manifest(m);
  test::expect_user_error([&] { TokenDataset::open(dir_); }, {manifest_path_, "train split has no tokens"});
}

TEST_F(DataDataset, EmptyValSplitIsAllowed) {
  json m = manifest();
  m["splits"]["val"] = json::array();
  save_manifest(m);
  const TokenDataset dataset = TokenDataset::open(dir_);
  EXPECT_EQ(dataset.tokens(Split::val), 0);
  EXPECT_TRUE(dataset.read_all(Split::val).empty());
}

}  // namespace
}  // namespace ustrain
