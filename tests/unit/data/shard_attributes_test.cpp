// A shard's attributes are read into room for one value: an attribute that holds an array
// (or nothing) is refused as damaged instead of overrunning that room. Found by the
// shard_attributes fuzz target (fuzz/regressions/shard_attributes/).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/shards/shard_file.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

// A valid shard whose attribute `name` is then replaced by `count` copies of a value of
// its kind (count 0: a null dataspace).
std::string shard_with_attribute_array(const test::ScratchDir& dir, const std::string& name, hsize_t count,
                                       bool text) {
  const std::string path = dir / "shard.h5";
  std::filesystem::remove(path);
  ShardHeader header;
  header.tokenizer = {"byte", "byte", 257, 256, "", ""};
  write_shard(path, header, {1, 2, 3}, {0, 3});
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(file, name.c_str());
  const hid_t space = count == 0 ? H5Screate(H5S_NULL) : H5Screate_simple(1, &count, nullptr);
  if (text) {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    const std::vector<const char*> values(count, "byte");
    const hid_t attribute = H5Acreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (count > 0) H5Awrite(attribute, type, values.data());
    H5Aclose(attribute);
    H5Tclose(type);
  } else {
    const std::vector<std::int64_t> values(count, 3);
    const hid_t attribute = H5Acreate2(file, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    if (count > 0) H5Awrite(attribute, H5T_NATIVE_INT64, values.data());
    H5Aclose(attribute);
  }
  H5Sclose(space);
  H5Fclose(file);
  return path;
}

TEST(ShardAttributes, AnArrayWhereOneValueBelongsIsRefused) {
  const test::ScratchDir dir;
  for (hsize_t count : {hsize_t{3}, hsize_t{0}}) {
    for (const char* name : {"token_count", "vocab_size", "format_version"}) {
      const std::string path = shard_with_attribute_array(dir, name, count, /*text=*/false);
      test::expect_user_error([&] { read_shard_header(path); },
                              {path, std::string("attribute ") + name + " is not a single value", "damaged"});
    }
    for (const char* name : {"tokenizer", "source"}) {
      const std::string path = shard_with_attribute_array(dir, name, count, /*text=*/true);
      test::expect_user_error([&] { read_shard_header(path); },
                              {path, std::string("attribute ") + name + " is not a single value"});
    }
  }
}

TEST(ShardAttributes, SingleValuesStillRead) {
  const test::ScratchDir dir;
  const std::string path = shard_with_attribute_array(dir, "token_count", 1, /*text=*/false);
  EXPECT_EQ(read_shard_header(path).token_count, 3);
}

}  // namespace
}  // namespace ustrain
