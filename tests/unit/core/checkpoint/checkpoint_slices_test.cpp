// Slices and their assembly: a tensor split across rank files in ways a future layout may
// split it (by rows, by columns, unevenly) is read back, whole or in any box, exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/checkpoint/reader.h"
#include "core/checkpoint/slices.h"
#include "core/checkpoint/writer.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

TEST(Slice, FormatsAndParses) {
  const Slice s{{0, 384}, {768, 512}};
  EXPECT_EQ(format_slice(s), "0:768,384:512");
  EXPECT_EQ(parse_slice("0:768,384:512"), s);
  EXPECT_EQ(parse_slice(""), Slice{});  // a scalar
  for (const char* bad : {"0:", ":4", "4:2", "0:4,", "a:b", "0-4", "0:4;1:2", "-1:3"})
    EXPECT_FALSE(parse_slice(bad).has_value()) << bad;
}

TEST(ShardKey, NamesStateTensorAndSlice) {
  const ShardKey k{"adam_m", "model.layers.3.mlp.up_proj.weight", Slice{{0, 0}, {64, 32}}};
  const std::string text = format_shard_key(k);
  EXPECT_EQ(text, "adam_m/model.layers.3.mlp.up_proj.weight/0:64,0:32");
  const auto back = parse_shard_key(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->state, "adam_m");
  EXPECT_EQ(back->name, "model.layers.3.mlp.up_proj.weight");
  EXPECT_EQ(back->slice, k.slice);
  for (const char* bad : {"param", "param/name", "/name/0:1", "param//0:1", "param/name/0:1,"})
    EXPECT_FALSE(parse_shard_key(bad).has_value()) << bad;
}

TEST(Slice, IntersectsAndContains) {
  const Slice a{{0, 2}, {4, 6}}, b{{3, 5}, {8, 9}};
  const auto c = intersect(a, b);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, (Slice{{3, 5}, {4, 6}}));
  EXPECT_FALSE(intersect(a, Slice{{4, 0}, {5, 9}}).has_value());  // touching is not sharing
  EXPECT_TRUE(contains(a, *c));
  EXPECT_FALSE(contains(*c, a));
}

// Element (i, j, k) of a (4, 5, 6) tensor holds 100 i + 10 j + k.
float value_at(std::int64_t i, std::int64_t j, std::int64_t k) { return static_cast<float>(100 * i + 10 * j + k); }

TEST(CopyRegion, CopiesASubBoxBetweenBoxes) {
  const Slice src_box{{1, 0, 2}, {4, 5, 6}};
  std::vector<float> src;
  for (std::int64_t i = 1; i < 4; ++i)
    for (std::int64_t j = 0; j < 5; ++j)
      for (std::int64_t k = 2; k < 6; ++k) src.push_back(value_at(i, j, k));
  const Slice dst_box{{2, 1, 3}, {4, 4, 6}};
  std::vector<float> dst(static_cast<std::size_t>(dst_box.numel()), -1.0f);
  const Slice region{{2, 2, 3}, {4, 4, 5}};
  copy_region(src.data(), src_box, dst.data(), dst_box, region);
  std::size_t at = 0;
  for (std::int64_t i = 2; i < 4; ++i)
    for (std::int64_t j = 1; j < 4; ++j)
      for (std::int64_t k = 3; k < 6; ++k, ++at) {
        const bool inside = j >= 2 && k < 5;
        EXPECT_EQ(dst[at], inside ? value_at(i, j, k) : -1.0f) << i << "," << j << "," << k;
      }
}

// A synthetic checkpoint: tensor "rows" (6, 8) split by rows over ranks 0 and 1 (4 + 2 rows),
// tensor "cols" (4, 10) split by columns over ranks 0, 1 and 2 (3 + 4 + 3), and a vector held
// whole by rank 2. Element (i, j) of a matrix holds 1000 * id + 10 * i + j.
class ShardedCheckpoint : public ::testing::Test {
 protected:
  struct Piece {
    int rank;
    std::string name;
    int id;
    Slice slice;
  };

  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("ustrain_slices_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static float element(int id, std::int64_t i, std::int64_t j) { return static_cast<float>(1000 * id + 10 * i + j); }

  std::vector<Piece> pieces() const {
    return {{0, "rows", 1, Slice{{0, 0}, {4, 8}}},  {1, "rows", 1, Slice{{4, 0}, {6, 8}}},
            {0, "cols", 2, Slice{{0, 0}, {4, 3}}},  {1, "cols", 2, Slice{{0, 3}, {4, 7}}},
            {2, "cols", 2, Slice{{0, 7}, {4, 10}}}, {2, "vec", 3, Slice{{0}, {5}}}};
  }

  // Writes the checkpoint; `skip` leaves one piece out.
  void write(int skip = -1) {
    CheckpointManifest m;
    m.ustrain_version = "test";
    m.recipe = "[run]\n";
    m.recipe_hash = recipe_hash(m.recipe);
    m.tensors = {{"rows", {6, 8}, {"param"}}, {"cols", {4, 10}, {"param"}}, {"vec", {5}, {"param"}}};
    m.mesh.dp = 3;  // three ranks wrote it
    const std::vector<Piece> all = pieces();
    SaveFaults none;
    for (int rank = 0; rank < 3; ++rank) {
      std::vector<SafetensorsEntry> entries;
      std::vector<std::vector<float>> data;
      for (std::size_t p = 0; p < all.size(); ++p) {
        if (all[p].rank != rank || static_cast<int>(p) == skip) continue;
        const Slice& s = all[p].slice;
        entries.push_back({format_shard_key({"param", all[p].name, s}), "F32", s.extent(), 0, 0});
        data.emplace_back();
        if (s.begin.size() == 1) {
          for (std::int64_t i = s.begin[0]; i < s.end[0]; ++i) data.back().push_back(element(all[p].id, 0, i));
        } else {
          for (std::int64_t i = s.begin[0]; i < s.end[0]; ++i)
            for (std::int64_t j = s.begin[1]; j < s.end[1]; ++j) data.back().push_back(element(all[p].id, i, j));
        }
      }
      lay_out_entries(entries);
      CheckpointFile f =
          write_rank_file(dir_, rank, /*step=*/0, entries, [&](std::size_t i) { return data[i].data(); }, none);
      f.data_state = "{\"rank\":" + std::to_string(rank) + "}";
      m.files.push_back(f);
    }
    write_manifest(dir_, m);
  }

  void expect_region(const CheckpointReader& r, const std::string& name, int id, const Slice& region) {
    std::vector<float> out(static_cast<std::size_t>(region.numel()), -1.0f);
    r.read("param", name, region, out.data());
    std::size_t at = 0;
    for (std::int64_t i = region.begin[0]; i < region.end[0]; ++i)
      for (std::int64_t j = region.begin[1]; j < region.end[1]; ++j, ++at)
        ASSERT_EQ(out[at], element(id, i, j)) << name << " " << format_slice(region) << " at " << i << "," << j;
  }

  std::string dir_;
};

TEST_F(ShardedCheckpoint, AssemblesAnyBoxFromTheRanksThatHoldIt) {
  write();
  const CheckpointReader r(dir_);
  EXPECT_EQ(r.data_state(2), "{\"rank\":2}");
  expect_region(r, "rows", 1, Slice{{0, 0}, {6, 8}});  // whole, from two files
  expect_region(r, "rows", 1, Slice{{3, 2}, {5, 7}});  // straddles the rank boundary
  expect_region(r, "rows", 1, Slice{{4, 0}, {6, 8}});  // exactly rank 1's slice
  expect_region(r, "rows", 1, Slice{{5, 7}, {6, 8}});  // one element
  expect_region(r, "cols", 2, Slice{{0, 0}, {4, 10}}); // whole, from three files
  expect_region(r, "cols", 2, Slice{{1, 2}, {3, 8}});  // touches all three ranks
  expect_region(r, "cols", 2, Slice{{0, 0}, {2, 5}});  // a tensor-parallel rank of another layout (tp = 2)
  std::vector<float> vec(3);
  r.read("param", "vec", Slice{{1}, {4}}, vec.data());
  EXPECT_EQ(vec, (std::vector<float>{3001, 3002, 3003}));
}

TEST_F(ShardedCheckpoint, AMissingSliceIsReportedWhenOpening) {
  write(/*skip=*/3);  // rank 1's columns of "cols"
  try {
    CheckpointReader r(dir_);
    FAIL() << "a checkpoint with a hole was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cols"), std::string::npos) << e.what();
  }
}

TEST_F(ShardedCheckpoint, AMissingRankFileIsNamed) {
  write();
  fs::remove(dir_ + "/rank-00001.safetensors");
  try {
    CheckpointReader r(dir_);
    FAIL() << "a checkpoint without a rank file was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00001.safetensors"), std::string::npos) << e.what();
  }
}

TEST_F(ShardedCheckpoint, DamagedDataFailsItsChecksum) {
  write();
  const std::string file = dir_ + "/rank-00002.safetensors";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-3, std::ios::end);  // inside the last tensor's data
  f.put('\x7f');
  f.close();
  const CheckpointReader r(dir_);  // sizes and headers are intact
  std::vector<float> vec(5);
  try {
    r.read("param", "vec", Slice{{0}, {5}}, vec.data());
    FAIL() << "damaged data was read without complaint";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ustrain
