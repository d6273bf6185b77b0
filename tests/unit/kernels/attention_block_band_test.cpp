// The band the CUDA block kernels bound their tile loops with (kernels/cuda/attention/attention_block_band.h)
// against the mask's definition (kernels/attention_mask.h) pair by pair: the band holds exactly
// the pairs the causal order and the window allow, and a tile of rows bounded by its first and
// last row's limits misses none of them (the kernels skip whatever lies outside).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

#include "kernels/cuda/attention/attention_block_band.h"

namespace ustrain::cuda {
namespace {

struct BandCase {
  std::int64_t nq, nk;
  bool causal;
  std::int64_t window, q_first, k_first;
  std::string str() const {
    return "nq=" + std::to_string(nq) + " nk=" + std::to_string(nk) + (causal ? " causal" : " none") +
           " window=" + std::to_string(window) + " q_first=" + std::to_string(q_first) +
           " k_first=" + std::to_string(k_first);
  }
};

// Query row i sees key row j: causal, the block's ranges end at one position; the window on
// absolute positions.
bool allowed(const BandCase& c, std::int64_t i, std::int64_t j) {
  const bool order = !c.causal || j <= i + c.nk - c.nq;
  const bool window = c.window == 0 || (c.q_first + i) - (c.k_first + j) < c.window;
  return order && window;
}

AttentionBand band_of(const BandCase& c) { return {c.nq, c.nk, c.causal, c.window, c.q_first - c.k_first}; }

void expect_band_is_the_mask(const BandCase& c) {
  const AttentionBand band = band_of(c);
  for (std::int64_t i = 0; i < c.nq; ++i)
    for (std::int64_t j = 0; j < c.nk; ++j) {
      ASSERT_EQ(band.contains(i, j), allowed(c, i, j)) << c.str() << " at query " << i << ", key " << j;
      if (allowed(c, i, j)) {
        ASSERT_TRUE(band.first_query(j) <= i && i < band.query_end(j)) << c.str() << " at " << i << ", " << j;
      }
    }
  // A tile's loop bounds: its first row's first key to its last row's end (and the other way).
  constexpr std::int64_t kTile = 32;
  for (std::int64_t i0 = 0; i0 < c.nq; i0 += kTile)
    for (std::int64_t i = i0; i < std::min(i0 + kTile, c.nq); ++i)
      for (std::int64_t j = 0; j < c.nk; ++j)
        if (allowed(c, i, j)) {
          ASSERT_TRUE(j >= band.key_begin(i0) && j < band.key_end(std::min(i0 + kTile, c.nq) - 1))
              << c.str() << ": query tile " << i0 << " misses key " << j;
        }
  for (std::int64_t j0 = 0; j0 < c.nk; j0 += kTile)
    for (std::int64_t j = j0; j < std::min(j0 + kTile, c.nk); ++j)
      for (std::int64_t i = 0; i < c.nq; ++i)
        if (allowed(c, i, j)) {
          ASSERT_TRUE(i >= band.first_query(j0) / kTile * kTile && i < band.query_end(std::min(j0 + kTile, c.nk) - 1))
              << c.str() << ": key tile " << j0 << " misses query " << i;
        }
}

TEST(AttentionBlockBand, HoldsExactlyThePairsTheMaskAllows) {
  const BandCase cases[] = {
      {100, 100, true, 0, 0, 0},    {100, 100, true, 16, 0, 0},  {45, 45, true, 1, 0, 0},     // self, window of 1
      {16, 24, true, 5, 10, 2},     {40, 48, false, 60, 100, 0},  // unequal; a window past the keys for most rows
      {64, 64, false, 30, 16, 0},   {70, 70, true, 70, 0, 0},     {33, 130, true, 0, 97, 0},  // decode-like
      {64, 50, false, 0, 0, 0},     {1, 1, true, 1, 5, 5},
  };
  for (const BandCase& c : cases) expect_band_is_the_mask(c);

  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int64_t> rows(1, 90), window(0, 40), position(0, 200);
  for (int n = 0; n < 200; ++n) {
    const BandCase c{rows(rng), rows(rng), n % 2 == 0, n % 3 == 0 ? 0 : window(rng), position(rng), position(rng)};
    expect_band_is_the_mask(c);
  }
}

TEST(AttentionBlockBand, AWindowLeavesOnlyItsDiagonals) {
  // 128 queries against their own 128 keys under a window of 16: 16 keys per row at most,
  // so the loops of a 32-row tile span 32 + 15 keys, not the causal 128.
  const AttentionBand band{128, 128, true, 16, 0};
  EXPECT_EQ(band.key_begin(96), 81);
  EXPECT_EQ(band.key_end(127), 128);
  EXPECT_EQ(band.query_end(0), 16);
  EXPECT_EQ(band.first_query(40), 40);
  EXPECT_FALSE(band.contains(100, 84));
  EXPECT_TRUE(band.contains(100, 85));
}

}  // namespace
}  // namespace ustrain::cuda
