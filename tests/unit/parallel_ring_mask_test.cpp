// The ring's derivation of each block's mask from the one mask the attention sub-layer
// chooses: under the causal mask, the zig-zag blocks of cp = 2 and cp = 4 get exactly the
// kinds and rows they always had, with the absolute positions of their first rows; under a
// window or documents, chunk pairs, those the mask allows no pair in skipped.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

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

// A block as (source, query rows, key rows, kind, q_first, k_first).
using Described = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, Kind, std::int64_t,
                             std::int64_t>;
std::vector<Described> described(const std::vector<RingBlock>& blocks) {
  std::vector<Described> all;
  for (const RingBlock& b : blocks)
    all.emplace_back(b.source, b.q.begin, b.q.count, b.k.begin, b.k.count, b.mask.kind, b.mask.q_first,
                     b.mask.k_first);
  return all;
}

TEST(RingMaskDerivation, AWindowSplitsStepsIntoChunkPairsAndSkipsThoseBeyondIt) {
  // cp = 4, chunks of 3 in 24 positions, W = 5: rank 1 holds 3..5 and 18..20. Its front chunk
  // meets only itself and rank 0's 0..2; its back chunk itself, and the keys 12..14 and 15..17
  // that end less than 5 positions before 18 (9..11 and 6..8 are too far back).
  AttentionMask windowed = AttentionMask::causal();
  windowed.window = 5;
  const std::vector<Described> want{
      {1, 0, 3, 0, 3, Kind::causal, 3, 3}, {1, 3, 3, 3, 3, Kind::causal, 18, 18}, {0, 0, 3, 0, 3, Kind::none, 3, 0},
      {3, 3, 3, 3, 3, Kind::none, 18, 12}, {2, 3, 3, 3, 3, Kind::none, 18, 15},
  };
  const std::vector<RingBlock> blocks = ring_schedule(1, 4, 6, windowed);
  EXPECT_EQ(described(blocks), want);
  for (const RingBlock& b : blocks) EXPECT_EQ(b.mask.window, 5);
}

TEST(RingMaskDerivation, DocumentsAcrossRanksSkipTheChunkPairsThatShareNoDocument) {
  // cp = 2, chunks of 4 in 16 positions, a document per chunk in sequence 0: rank 0 (0..3 and
  // 12..15) meets only its own chunks. Sequence 1 is one document: every causal pair stays.
  std::vector<std::int32_t> ids(32, 0);
  for (int p = 0; p < 16; ++p) ids[static_cast<std::size_t>(p)] = p / 4;
  AttentionMask documents = AttentionMask::causal();
  documents.q_documents = documents.k_documents = Tensor(ids.data(), Shape{2, 16}, DType::i32);
  CpuBackend cpu(1);
  const HostDocuments host = HostDocuments::of(cpu, documents);
  const std::vector<Described> own{{0, 0, 4, 0, 4, Kind::causal, 0, 0}, {0, 4, 4, 4, 4, Kind::causal, 12, 12}};
  HostDocuments first_only = host;
  first_only.batch = 1;
  first_only.q.resize(16);
  first_only.k.resize(16);
  EXPECT_EQ(described(ring_schedule(0, 2, 8, documents, first_only)), own);
  std::vector<Described> all = own;
  all.insert(all.begin() + 1, Described{0, 4, 4, 0, 4, Kind::none, 12, 0});
  all.push_back({1, 4, 4, 0, 4, Kind::none, 12, 4});
  all.push_back({1, 4, 4, 4, 4, Kind::none, 12, 8});
  EXPECT_EQ(described(ring_schedule(0, 2, 8, documents, host)), all);
  EXPECT_EQ(described(ring_schedule(0, 2, 8, documents)), all);  // ids unknown: nothing skipped
}

}  // namespace
}  // namespace ustrain
