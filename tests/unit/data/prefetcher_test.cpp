// Batches made ahead on a thread are exactly the batches read in place; positions resume
// exactly; errors on the thread surface in the caller.
#include <gtest/gtest.h>

#include <numeric>

#include "data/loading/prefetcher.h"
#include "tests/unit/data/test_support.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::shared_ptr<const Loader> counting_loader(std::int32_t length, std::int64_t seq_len, int reader = 0, int readers = 1) {
  auto tokens = std::make_shared<std::vector<std::int32_t>>(length);
  std::iota(tokens->begin(), tokens->end(), 0);
  return std::make_shared<const Loader>(memory_source(std::move(tokens)), LoaderOptions{seq_len, 42, true, reader, readers, {}});
}

// A stream whose reads fail from position `bad` on, like a damaged shard.
class FailingTokens final : public TokenSource {
 public:
  explicit FailingTokens(std::int64_t bad) : bad_(bad) {}
  std::int64_t size() const override { return 1000; }
  void read(std::int64_t first, std::int64_t count, std::int32_t* out) const override {
    if (first + count > bad_) throw UserError("shard broken.h5 is damaged at " + std::to_string(bad_));
    std::iota(out, out + count, static_cast<std::int32_t>(first));
  }

 private:
  std::int64_t bad_;
};

std::vector<std::vector<std::int32_t>> batches(BatchPrefetcher& prefetcher, int count) {
  std::vector<std::vector<std::int32_t>> out;
  for (int i = 0; i < count; ++i) {
    const TokenBatch batch = prefetcher.next();
    out.emplace_back(batch.ids.begin(), batch.ids.end());
    out.back().insert(out.back().end(), batch.targets.begin(), batch.targets.end());
  }
  return out;
}

TEST(DataPrefetcher, ThreadedBatchesEqualBatchesReadInPlace) {
  const auto loader = counting_loader(5001, 16);
  BatchPrefetcher inline_reader(loader, 4, 0), threaded(loader, 4, 3);
  EXPECT_EQ(batches(threaded, 100), batches(inline_reader, 100));
  EXPECT_EQ(threaded.position(), 400u);
  // Batch b holds the loader's samples 4b .. 4b + 3.
  BatchPrefetcher again(loader, 4, 2);
  std::vector<std::int32_t> inputs(16), targets(16);
  for (int b = 0; b < 5; ++b) {
    EXPECT_EQ(again.position(), static_cast<std::uint64_t>(4 * b));
    const TokenBatch batch = again.next();
    loader->read_sample(4 * b + 2, inputs.data(), targets.data());
    EXPECT_TRUE(std::equal(inputs.begin(), inputs.end(), batch.ids.begin() + 32));
    EXPECT_TRUE(std::equal(targets.begin(), targets.end(), batch.targets.begin() + 32));
  }
}

TEST(DataPrefetcher, SeekingToASavedPositionResumesWithExactlyTheNextBatch) {
  const auto loader = counting_loader(3001, 8, 1, 2);
  for (int consumed : {0, 1, 37, 120}) {
    BatchPrefetcher original(loader, 3, 4);
    batches(original, consumed);
    const std::uint64_t saved = original.position();
    const auto expected = batches(original, 10);
    BatchPrefetcher resumed(loader, 3, 4);
    batches(resumed, 5);  // read ahead, then jump
    resumed.seek(saved);
    EXPECT_EQ(resumed.position(), saved);
    EXPECT_EQ(batches(resumed, 10), expected) << "after " << consumed << " batches";
  }
}

TEST(DataPrefetcher, AnErrorOnTheThreadReachesTheCaller) {
  for (int depth : {0, 3}) {
    auto loader = std::make_shared<const Loader>(
        std::vector<LoaderSource>{{std::make_shared<FailingTokens>(500), 1.0, "broken"}}, LoaderOptions{10, 1, false, 0, 1, {}});
    BatchPrefetcher prefetcher(loader, 5, depth);
    // Sample j needs tokens 10j..10j+10: samples 0..48 lie below token 500, and batch 9
    // (samples 45..49) is the first to need it.
    for (int b = 0; b < 9; ++b) EXPECT_NO_THROW(prefetcher.next()) << b;
    test::expect_user_error([&] { prefetcher.next(); }, {"broken.h5", "damaged"});
  }
}

TEST(DataPrefetcher, StopsCleanlyWithBatchesStillQueued) {
  const auto loader = counting_loader(100001, 32);
  for (int i = 0; i < 20; ++i) {
    BatchPrefetcher prefetcher(loader, 8, 4);
    EXPECT_EQ(prefetcher.position(), 0u);
    EXPECT_EQ(prefetcher.next().ids.size(), 8u * 32u);
    EXPECT_EQ(prefetcher.position(), 8u);
  }
}

}  // namespace
}  // namespace ustrain
