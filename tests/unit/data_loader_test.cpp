// The loader's sampling contract (data/loader.h): windows, readers, seeds, epochs, resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "data/loader.h"
#include "data_test_support.h"

namespace ustrain {
namespace {

// Token i of the stream is i, so a sample's first input names its window: start / seq_len.
std::shared_ptr<const std::vector<std::int32_t>> counting_stream(std::int32_t length) {
  auto tokens = std::make_shared<std::vector<std::int32_t>>(length);
  std::iota(tokens->begin(), tokens->end(), 0);
  return tokens;
}

// The windows of the next `count` samples, checking every sample's contents on the way.
std::vector<std::int64_t> take_windows(Loader& loader, std::int64_t seq_len, std::int64_t count) {
  std::vector<std::int32_t> inputs(count * seq_len), targets(count * seq_len);
  loader.next(inputs.data(), targets.data(), count);
  std::vector<std::int64_t> windows;
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int32_t start = inputs[b * seq_len];
    EXPECT_EQ(start % seq_len, 0) << "sample " << b << " does not start at a window boundary";
    for (std::int64_t t = 0; t < seq_len; ++t) {
      EXPECT_EQ(inputs[b * seq_len + t], start + t);
      EXPECT_EQ(targets[b * seq_len + t], start + t + 1);
    }
    windows.push_back(start / seq_len);
  }
  return windows;
}

TEST(DataLoader, CountsWindowsOfSeqLenPlusOneTokens) {
  // 41 tokens with seq_len 8: windows need tokens up to 8w + 8 <= 40, so w = 0..4.
  EXPECT_EQ(Loader(counting_stream(41), 8, 1, false).windows_per_epoch(), 5);
  EXPECT_EQ(Loader(counting_stream(40), 8, 1, false).windows_per_epoch(), 4);
  EXPECT_EQ(Loader(counting_stream(9), 8, 1, false).windows_per_epoch(), 1);
  EXPECT_EQ(Loader(counting_stream(41), 8, 1, false, 1, 2).windows_per_epoch(), 2);
}

TEST(DataLoader, WithoutShuffleWindowsComeInOrder) {
  Loader loader(counting_stream(41), 8, 1, false);
  EXPECT_EQ(take_windows(loader, 8, 5), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(take_windows(loader, 8, 2), (std::vector<std::int64_t>{0, 1}));
  Loader second_reader(counting_stream(41), 8, 1, false, 1, 2);
  EXPECT_EQ(take_windows(second_reader, 8, 2), (std::vector<std::int64_t>{1, 3}));
}

TEST(DataLoader, ShuffledEpochVisitsEveryWindowOnce) {
  Loader loader(counting_stream(1001), 10, 7, true);
  ASSERT_EQ(loader.windows_per_epoch(), 100);
  std::vector<std::int64_t> windows = take_windows(loader, 10, 100);
  EXPECT_NE(windows, [] { std::vector<std::int64_t> v(100); std::iota(v.begin(), v.end(), 0); return v; }());
  std::sort(windows.begin(), windows.end());
  for (std::int64_t i = 0; i < 100; ++i) EXPECT_EQ(windows[i], i);
}

TEST(DataLoader, ReadersSplitTheSingleReaderOrderWithoutOverlap) {
  for (int readers : {2, 3, 7}) {
    const std::int64_t seq_len = 4;
    Loader single(counting_stream(4 * 50 + 1), seq_len, 11, true);
    const std::vector<std::int64_t> order = take_windows(single, seq_len, 50);
    std::set<std::int64_t> seen;
    for (int r = 0; r < readers; ++r) {
      Loader reader(counting_stream(4 * 50 + 1), seq_len, 11, true, r, readers);
      ASSERT_EQ(reader.windows_per_epoch(), 50 / readers);
      const std::vector<std::int64_t> mine = take_windows(reader, seq_len, reader.windows_per_epoch());
      for (std::size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(mine[i], order[r + i * readers]) << "reader " << r << " of " << readers;
        EXPECT_TRUE(seen.insert(mine[i]).second) << "window " << mine[i] << " taken twice";
      }
    }
    // Together the readers cover the single reader's epoch, less the same remainder for all.
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(50 / readers * readers));
    if (50 % readers == 0) {
      EXPECT_EQ(seen, std::set<std::int64_t>(order.begin(), order.end()));
    }
  }
}

TEST(DataLoader, SameSeedSameOrderOtherSeedOtherOrder) {
  Loader a(counting_stream(2001), 20, 5, true), b(counting_stream(2001), 20, 5, true),
      c(counting_stream(2001), 20, 6, true);
  const auto order_a = take_windows(a, 20, 100);
  EXPECT_EQ(take_windows(b, 20, 100), order_a);
  EXPECT_NE(take_windows(c, 20, 100), order_a);
}

TEST(DataLoader, RollsOverIntoANewlyShuffledEpoch) {
  Loader loader(counting_stream(301), 6, 3, true);
  ASSERT_EQ(loader.windows_per_epoch(), 50);
  const auto first = take_windows(loader, 6, 30);
  EXPECT_EQ(loader.state().epoch, 0u);
  EXPECT_EQ(loader.state().index, 30u);
  const auto straddling = take_windows(loader, 6, 40);  // 20 from epoch 0, 20 from epoch 1
  EXPECT_EQ(loader.state().epoch, 1u);
  EXPECT_EQ(loader.state().index, 20u);
  std::vector<std::int64_t> epoch0 = first;
  epoch0.insert(epoch0.end(), straddling.begin(), straddling.begin() + 20);
  const auto rest = take_windows(loader, 6, 30);
  std::vector<std::int64_t> epoch1(straddling.begin() + 20, straddling.end());
  epoch1.insert(epoch1.end(), rest.begin(), rest.end());
  EXPECT_NE(epoch0, epoch1);
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch0, epoch1);
  EXPECT_EQ(std::set<std::int64_t>(epoch0.begin(), epoch0.end()).size(), 50u);
}

TEST(DataLoader, RestoreContinuesWithExactlyTheNextBatch) {
  for (std::int64_t consumed : {0, 13, 50, 64, 113}) {  // within, at the end of, and past epochs
    Loader original(counting_stream(301), 6, 9, true, 1, 2);
    ASSERT_EQ(original.windows_per_epoch(), 25);
    take_windows(original, 6, consumed);
    const LoaderState saved = original.state();
    const auto expected = take_windows(original, 6, 30);
    Loader resumed(counting_stream(301), 6, 9, true, 1, 2);
    resumed.restore(saved);
    EXPECT_EQ(resumed.state().epoch, saved.epoch);
    EXPECT_EQ(resumed.state().index, saved.index);
    EXPECT_EQ(take_windows(resumed, 6, 30), expected) << "after " << consumed << " samples";
  }
}

TEST(DataLoader, RestoreRejectsAPositionBeyondTheEpoch) {
  Loader loader(counting_stream(301), 6, 9, true);
  test::expect_user_error([&] { loader.restore({0, 51}); }, {"51", "50 samples per epoch"});
}

TEST(DataLoader, TooShortStreamsAreUserErrors) {
  test::expect_user_error([] { Loader(counting_stream(8), 8, 1, true); }, {"8 tokens", "seq_len + 1 = 9"});
  test::expect_user_error([] { Loader(counting_stream(17), 8, 1, true, 0, 3); }, {"2 samples", "3 data readers"});
}

}  // namespace
}  // namespace ustrain
