// The ring's derivation of each block's mask from the one mask the attention sub-layer
// chooses: under the causal mask, the zig-zag blocks of cp = 2 and cp = 4 get exactly the
// kinds and rows they always had, with the absolute positions of their first rows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/ring_attention.h"

namespace ustrain {
namespace {

using Kind = AttentionMask::Kind;

// A block as one word: "self" (all queries against all keys, causal), "front" (all queries
// against the front chunk of the keys, none) or "back" (the back chunk of the queries against
// all keys, none).
std::string shape_of(const RingBlock& b, std::int64_t local) {
  const std::int64_t chunk = local / 2;
  const bool all_q = b.q.begin == 0 && b.q.count == local, all_k = b.k.begin == 0 && b.k.count == local;
  if (all_q && all_k && b.mask.kind == Kind::causal) return "self";
  if (all_q && b.k.begin == 0 && b.k.count == chunk && b.mask.kind == Kind::none) return "front";
  if (all_k && b.q.begin == chunk && b.q.count == chunk && b.mask.kind == Kind::none) return "back";
  return "unexpected";
}

// Each rank's blocks in ring order as (source, shape).
std::vector<std::vector<std::pair<int, std::string>>> schedules(int size, std::int64_t local, const AttentionMask& m) {
  std::vector<std::vector<std::pair<int, std::string>>> all;
  for (int rank = 0; rank < size; ++rank) {
    all.emplace_back();
    for (const RingBlock& b : ring_schedule(rank, size, local, m)) all.back().emplace_back(b.source, shape_of(b, local));
  }
  return all;
}

TEST(RingMaskDerivation, TheCausalMaskGivesTheZigZagBlocksOfTwoRanks) {
  const std::vector<std::vector<std::pair<int, std::string>>> want{
      {{0, "self"}, {1, "back"}},
      {{1, "self"}, {0, "front"}},
  };
  EXPECT_EQ(schedules(2, 8, AttentionMask::causal()), want);
}

TEST(RingMaskDerivation, TheCausalMaskGivesTheZigZagBlocksOfFourRanks) {
  const std::vector<std::vector<std::pair<int, std::string>>> want{
      {{0, "self"}, {3, "back"}, {2, "back"}, {1, "back"}},
      {{1, "self"}, {0, "front"}, {3, "back"}, {2, "back"}},
      {{2, "self"}, {1, "front"}, {0, "front"}, {3, "back"}},
      {{3, "self"}, {2, "front"}, {1, "front"}, {0, "front"}},
  };
  EXPECT_EQ(schedules(4, 6, AttentionMask::causal()), want);
}

TEST(RingMaskDerivation, EachBlockStartsAtTheAbsolutePositionsOfItsFirstRows) {
  // cp = 4, chunks of 3 tokens in a sequence of 24: rank 1 holds chunks 1 and 6 (positions 3
  // and 18 on), rank 0 chunks 0 and 7, rank 3 chunks 3 and 4.
  const std::vector<RingBlock> blocks = ring_schedule(1, 4, 6, AttentionMask::causal());
  EXPECT_EQ(blocks[0].mask.q_first, 3);  // self: its own rows
  EXPECT_EQ(blocks[0].mask.k_first, 3);
  EXPECT_EQ(blocks[1].mask.q_first, 3);  // rank 0's front chunk: positions 0 ..
  EXPECT_EQ(blocks[1].mask.k_first, 0);
  EXPECT_EQ(blocks[2].mask.q_first, 18);  // the back chunk against rank 3: positions 9 ..
  EXPECT_EQ(blocks[2].mask.k_first, 9);
  // The sub-layer's first positions offset every block's.
  AttentionMask shifted = AttentionMask::causal();
  shifted.q_first = shifted.k_first = 100;
  EXPECT_EQ(ring_schedule(1, 4, 6, shifted)[2].mask.q_first, 118);
}

TEST(RingMaskDerivation, OneRankMeetsItsOwnKeysUnderTheSubLayersMask) {
  const std::vector<RingBlock> causal = ring_schedule(0, 1, 7, AttentionMask::causal());
  ASSERT_EQ(causal.size(), 1u);
  EXPECT_EQ(causal[0].mask.kind, Kind::causal);
  EXPECT_EQ(causal[0].q.count, 7);
  EXPECT_EQ(causal[0].k.count, 7);
  EXPECT_EQ(causal[0].mask.q_first, 0);
}

TEST(RingMaskDerivation, WithoutACausalMaskEveryBlockIsWholeAndUnmasked) {
  for (const RingBlock& b : ring_schedule(2, 4, 6, AttentionMask::none())) {
    EXPECT_EQ(b.mask.kind, Kind::none);
    EXPECT_EQ(b.q.count, 6);
    EXPECT_EQ(b.k.count, 6);
  }
}

TEST(RingMaskDerivation, AWindowReachesEveryBlockAndDocumentsAreRefusedAcrossRanks) {
  AttentionMask windowed = AttentionMask::causal();
  windowed.window = 5;
  for (const RingBlock& b : ring_schedule(1, 4, 6, windowed)) EXPECT_EQ(b.mask.window, 5);
  std::vector<std::int32_t> docs(6, 0);
  AttentionMask documents = AttentionMask::causal();
  documents.q_documents = documents.k_documents = Tensor(docs.data(), Shape{1, 6}, DType::i32);
  EXPECT_EQ(ring_schedule(0, 1, 6, documents).size(), 1u);
  EXPECT_THROW(ring_schedule(0, 2, 6, documents), std::logic_error);
}

}  // namespace
}  // namespace ustrain
