#include "tests/unit/data/test_support.h"

#include <hdf5.h>

#include <filesystem>

#include "data/tokenizers/byte_tokenizer.h"

namespace ustrain::test {
namespace {

std::vector<std::uint64_t> doc_offsets_of(const std::string& path) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0) << path;
  const hid_t dataset = H5Dopen2(file, "doc_offsets", H5P_DEFAULT);
  const hid_t space = H5Dget_space(dataset);
  hsize_t length = 0;
  H5Sget_simple_extent_dims(space, &length, nullptr);
  std::vector<std::uint64_t> offsets(length);
  EXPECT_GE(H5Dread(dataset, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data()), 0);
  H5Sclose(space);
  H5Dclose(dataset);
  H5Fclose(file);
  return offsets;
}

}  // namespace

std::vector<std::vector<std::int32_t>> read_token_documents(const TokenDataset& dataset, Split split) {
  const std::vector<std::int32_t> tokens = dataset.read_all(split);
  // Global start of every document: shard base + the shard's offsets (its last entry is the
  // shard's token count, not a document).
  std::vector<std::size_t> starts;
  std::size_t base = 0;
  for (const ShardInfo& shard : dataset.shards(split)) {
    const std::vector<std::uint64_t> offsets =
        doc_offsets_of((std::filesystem::path(dataset.dir()) / shard.file).string());
    EXPECT_EQ(offsets.size(), static_cast<std::size_t>(shard.documents) + 1) << shard.file;
    EXPECT_EQ(offsets.back(), static_cast<std::uint64_t>(shard.tokens)) << shard.file;
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i) starts.push_back(base + offsets[i]);
    base += static_cast<std::size_t>(shard.tokens);
  }
  EXPECT_EQ(base, tokens.size());
  if (!tokens.empty()) {
    EXPECT_TRUE(!starts.empty() && starts.front() == 0) << "the stream starts mid-document";
  }
  starts.push_back(tokens.size());
  std::vector<std::vector<std::int32_t>> documents;
  for (std::size_t d = 0; d + 1 < starts.size(); ++d)
    documents.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(starts[d]),
                           tokens.begin() + static_cast<std::ptrdiff_t>(starts[d + 1]));
  return documents;
}

std::vector<std::string> read_documents(const TokenDataset& dataset, Split split) {
  std::vector<std::string> documents;
  for (const std::vector<std::int32_t>& ids : read_token_documents(dataset, split)) {
    std::string text;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == ByteTokenizer::kEos) {
        EXPECT_EQ(i + 1, ids.size()) << "EOS inside document " << documents.size();
        continue;
      }
      EXPECT_TRUE(ids[i] >= 0 && ids[i] < 256) << "id " << ids[i];
      text.push_back(static_cast<char>(ids[i]));
    }
    documents.push_back(std::move(text));
  }
  return documents;
}

}  // namespace ustrain::test
