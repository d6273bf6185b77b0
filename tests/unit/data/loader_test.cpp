// The loader's sampling contract (data/loading/loader.h): windows, readers, seeds, epochs, blends.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "data/loading/loader.h"
#include "tests/unit/data/test_support.h"

namespace ustrain {
namespace {

// Token i of the stream is base + i, so a sample's first input names its stream and window.
std::shared_ptr<const TokenSource> counting_stream(std::int32_t length, std::int32_t base = 0) {
  auto tokens = std::make_shared<std::vector<std::int32_t>>(length);
  std::iota(tokens->begin(), tokens->end(), base);
  return std::make_shared<MemoryTokens>(std::move(tokens));
}

Loader single(std::int32_t length, std::int64_t seq_len, std::uint64_t seed, bool shuffle, int reader = 0,
              int readers = 1) {
  return Loader({{counting_stream(length), 1.0, "counting"}}, {seq_len, seed, shuffle, reader, readers, {}});
}

// The first input token of each of samples [first, first + count), checking every sample's contents.
std::vector<std::int64_t> take(const Loader& loader, std::uint64_t first, std::int64_t count) {
  const std::int64_t seq_len = loader.options().seq_len;
  std::vector<std::int32_t> inputs(seq_len), targets(seq_len);
  std::vector<std::int64_t> starts;
  for (std::int64_t b = 0; b < count; ++b) {
    loader.read_sample(first + b, inputs.data(), targets.data());
    for (std::int64_t t = 0; t < seq_len; ++t) {
      EXPECT_EQ(inputs[t], inputs[0] + t);
      EXPECT_EQ(targets[t], inputs[0] + t + 1);
    }
    starts.push_back(inputs[0]);
  }
  return starts;
}

// Windows of a single counting stream: start / seq_len.
std::vector<std::int64_t> windows(const Loader& loader, std::uint64_t first, std::int64_t count) {
  std::vector<std::int64_t> starts = take(loader, first, count);
  for (std::int64_t& start : starts) {
    EXPECT_EQ(start % loader.options().seq_len, 0) << "not at a window boundary";
    start /= loader.options().seq_len;
  }
  return starts;
}

std::vector<std::int64_t> iota_vector(std::int64_t n) {
  std::vector<std::int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(DataLoader, CountsWindowsOfSeqLenPlusOneTokens) {
  // 41 tokens with seq_len 8: windows need tokens up to 8w + 8 <= 40, so w = 0..4.
  EXPECT_EQ(single(41, 8, 1, false).windows(0), 5u);
  EXPECT_EQ(single(40, 8, 1, false).windows(0), 4u);
  EXPECT_EQ(single(9, 8, 1, false).windows(0), 1u);
}

TEST(DataLoader, WithoutShuffleWindowsComeInOrderAndRollOver) {
  EXPECT_EQ(windows(single(41, 8, 1, false), 0, 7), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 0, 1}));
  EXPECT_EQ(windows(single(41, 8, 1, false, 1, 2), 0, 4), (std::vector<std::int64_t>{1, 3, 0, 2}));
}

TEST(DataLoader, ShuffledEpochVisitsEveryWindowOnceInANewOrderEachEpoch) {
  const Loader loader = single(1001, 10, 7, true);
  ASSERT_EQ(loader.windows(0), 100u);
  std::vector<std::int64_t> epoch0 = windows(loader, 0, 100), epoch1 = windows(loader, 100, 100);
  EXPECT_NE(epoch0, iota_vector(100));
  EXPECT_NE(epoch0, epoch1);
  for (std::uint64_t j = 0; j < 200; ++j) EXPECT_EQ(loader.origin(j).epoch, j / 100);
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch0, iota_vector(100));
  EXPECT_EQ(epoch1, iota_vector(100));
}

TEST(DataLoader, ReadersSplitTheSingleReaderOrderWithoutOverlap) {
  for (int readers : {2, 3, 7}) {
    const std::int64_t seq_len = 4;
    const std::vector<std::int64_t> order = windows(single(4 * 50 + 1, seq_len, 11, true), 0, 50);
    std::vector<std::int64_t> together;
    for (int r = 0; r < readers; ++r) {
      const Loader reader = single(4 * 50 + 1, seq_len, 11, true, r, readers);
      // Reader r's share of the first epoch: positions r, r + R, ... below 50.
      const std::int64_t share = (50 - r + readers - 1) / readers;
      const std::vector<std::int64_t> mine = windows(reader, 0, share);
      for (std::int64_t i = 0; i < share; ++i)
        EXPECT_EQ(mine[i], order[r + i * readers]) << "reader " << r << " of " << readers;
      together.insert(together.end(), mine.begin(), mine.end());
    }
    // Together the readers take the single reader's epoch exactly: every window once.
    std::sort(together.begin(), together.end());
    EXPECT_EQ(together, iota_vector(50)) << readers << " readers";
  }
}

TEST(DataLoader, SameSeedSameOrderOtherSeedOtherOrder) {
  const auto order = windows(single(2001, 20, 5, true), 0, 100);
  EXPECT_EQ(windows(single(2001, 20, 5, true), 0, 100), order);
  EXPECT_NE(windows(single(2001, 20, 6, true), 0, 100), order);
}

TEST(DataLoader, AnySampleCanBeReadOnItsOwn) {
  const Loader loader = single(3001, 6, 9, true, 1, 3);
  const std::vector<std::int64_t> sequence = windows(loader, 0, 700);
  for (std::uint64_t j : {0u, 1u, 166u, 167u, 500u, 699u}) EXPECT_EQ(windows(loader, j, 1)[0], sequence[j]) << j;
}

TEST(DataLoader, BlendMeetsItsWeightsAndEachSourceKeepsItsOwnEpochs) {
  // Source 0 counts from 0, source 1 from 1'000'000: a sample's first token names its source.
  const Loader loader({{counting_stream(801), 0.7, "a"}, {counting_stream(401, 1'000'000), 0.3, "b"}},
                      {8, 3, true, 0, 1, {}});
  const std::vector<std::int64_t> starts = take(loader, 0, 2000);
  std::map<int, std::vector<std::int64_t>> per_source;
  for (std::int64_t start : starts) per_source[start >= 1'000'000].push_back(start % 1'000'000 / 8);
  // The interleaving is exact to one sample per source, at every prefix.
  EXPECT_NEAR(static_cast<double>(per_source[0].size()), 1400, 1);
  EXPECT_NEAR(static_cast<double>(per_source[1].size()), 600, 1);
  int from_a = 0;
  for (std::size_t g = 0; g < starts.size(); ++g) {
    from_a += starts[g] < 1'000'000;
    ASSERT_LE(std::abs(from_a - 0.7 * static_cast<double>(g + 1)), 1.0) << "after " << g + 1 << " samples";
  }
  // Source b has 50 windows: its first 600 samples are 12 whole epochs, each a permutation.
  for (int epoch = 0; epoch < 12; ++epoch) {
    std::vector<std::int64_t> one(per_source[1].begin() + epoch * 50, per_source[1].begin() + (epoch + 1) * 50);
    std::sort(one.begin(), one.end());
    EXPECT_EQ(one, iota_vector(50)) << "epoch " << epoch;
  }
}

TEST(DataLoader, TooShortStreamsAreUserErrors) {
  test::expect_user_error([] { single(8, 8, 1, true); }, {"8 tokens", "seq_len + 1 = 9"});
  test::expect_user_error(
      [] { Loader({{counting_stream(100), 1.0, "a"}, {counting_stream(5), 1.0, "tiny/dir"}}, {8, 1, true, 0, 1, {}}); },
      {"tiny/dir", "5 tokens"});
}

}  // namespace
}  // namespace ustrain
