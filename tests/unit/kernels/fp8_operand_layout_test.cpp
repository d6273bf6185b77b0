// The FP8 operand layouts the CUDA kernels and cuBLASLt share (kernels/cuda/fp8/fp8_operand_layout.h):
// groups per recipe, and where each group's inverse scale goes in cuBLASLt's scale tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "kernels/cuda/fp8/fp8_operand_layout.h"
#include "kernels/cuda/fp8/fp8_scratch_sizes.h"

namespace ustrain::cuda {
namespace {

TEST(Fp8OperandLayout, GroupsTileTheOperandAsEachRecipeSays) {
  const Fp8OperandShape tensor{300, 200, Fp8Grouping::tensor};
  EXPECT_EQ(tensor.groups(), 1);
  EXPECT_EQ(tensor.group_of(299, 199), 0);
  const Fp8OperandShape row{300, 200, Fp8Grouping::row};
  EXPECT_EQ(row.groups(), 300);
  EXPECT_EQ(row.group_of(7, 199), 7);
  const Fp8OperandShape vec{300, 200, Fp8Grouping::vec128};  // K blocks: [0, 128), [128, 200)
  EXPECT_EQ(vec.grid_k(), 2);
  EXPECT_EQ(vec.groups(), 600);
  EXPECT_EQ(vec.group_of(5, 127), 10);
  EXPECT_EQ(vec.group_of(5, 128), 11);
  const Fp8OperandShape blk{300, 200, Fp8Grouping::blk128};  // 3 x 2 blocks
  EXPECT_EQ(blk.groups(), 6);
  EXPECT_EQ(blk.group_of(127, 127), 0);
  EXPECT_EQ(blk.group_of(128, 0), 2);
  EXPECT_EQ(blk.group_of(299, 199), 5);
}

TEST(Fp8OperandLayout, CublasLtScaleTensorsFollowTheDocumentedLayouts) {
  // VEC128_32F: (outer, L) outer-major, group (o, b) at b * outer + o.
  const Fp8OperandShape vec{8, 300, Fp8Grouping::vec128};  // L = 3
  EXPECT_EQ(vec.lt_floats(), 24);
  EXPECT_EQ(vec.lt_index(vec.group_of(5, 0)), 5);
  EXPECT_EQ(vec.lt_index(vec.group_of(5, 130)), 8 + 5);
  EXPECT_EQ(vec.lt_index(vec.group_of(7, 299)), 2 * 8 + 7);
  // BLK128x128_32F: K-major (L4, ceil(outer / 128)), L4 = L rounded up to 4.
  const Fp8OperandShape blk{300, 640, Fp8Grouping::blk128};  // L = 5, L4 = 8, 3 outer blocks
  EXPECT_EQ(blk.padded_k_blocks(), 8);
  EXPECT_EQ(blk.lt_floats(), 24);
  EXPECT_EQ(blk.lt_index(blk.group_of(0, 600)), 4);
  EXPECT_EQ(blk.lt_index(blk.group_of(200, 0)), 8);
  EXPECT_EQ(blk.lt_index(blk.group_of(299, 639)), 2 * 8 + 4);
  // Every group has its own place.
  for (const Fp8OperandShape& s : {vec, blk, Fp8OperandShape{40, 16, Fp8Grouping::row}}) {
    std::set<std::int64_t> seen;
    for (std::int64_t g = 0; g < s.groups(); ++g) {
      const std::int64_t i = s.lt_index(g);
      EXPECT_TRUE(i >= 0 && i < s.lt_floats()) << fp8_grouping_name(s.grouping) << " group " << g;
      EXPECT_TRUE(seen.insert(i).second) << fp8_grouping_name(s.grouping) << " group " << g;
    }
  }
}

TEST(Fp8OperandLayout, RecipesGroupAndSizeTheirScratchAsTheKernelsDo) {
  using fp8::Recipe;
  using fp8::Role;
  EXPECT_EQ(fp8_grouping(Recipe::delayed, Role::weight), Fp8Grouping::tensor);
  EXPECT_EQ(fp8_grouping(Recipe::current, Role::gradient), Fp8Grouping::tensor);
  EXPECT_EQ(fp8_grouping(Recipe::rowwise, Role::activation), Fp8Grouping::row);
  EXPECT_EQ(fp8_grouping(Recipe::blockwise, Role::weight), Fp8Grouping::blk128);
  EXPECT_EQ(fp8_grouping(Recipe::blockwise, Role::gradient), Fp8Grouping::vec128);
  // blockwise, N = 256, I = 384, O = 128: the forward's W (128, 384) in one row of three
  // 128x128 blocks and x (256, 384) in 1x128 groups are the largest pair (the weight
  // gradient's x^T (384, 256) and dout^T (128, 256) take 14 KiB less).
  const auto operand = [](std::int64_t outer, std::int64_t k, Fp8Grouping g) {
    const std::size_t codes = static_cast<std::size_t>(outer * k);  // multiples of 256 here
    const std::int64_t groups = Fp8OperandShape{outer, k, g}.groups();
    return codes + 3 * round_up_scratch(static_cast<std::size_t>(groups) * sizeof(float));
  };
  EXPECT_EQ(fp8_linear_scratch_bytes(Recipe::blockwise, 256, 384, 128),
            operand(128, 384, Fp8Grouping::blk128) + operand(256, 384, Fp8Grouping::vec128));
  EXPECT_GT(fp8_linear_scratch_bytes(Recipe::blockwise, 256, 384, 128),
            operand(384, 256, Fp8Grouping::vec128) + operand(128, 256, Fp8Grouping::vec128));
}

}  // namespace
}  // namespace ustrain::cuda
