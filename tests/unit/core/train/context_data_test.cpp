// Context parallelism's data: each cp rank reads its two runs of every window (inputs and
// targets), and the ranks' runs put back in place are the window; batches through the
// prefetcher hold the runs of the same samples.
#include <gtest/gtest.h>

#include <numeric>

#include "data/loading/loader.h"
#include "data/loading/prefetcher.h"
#include "parallel/context_split.h"

namespace ustrain {
namespace {

std::vector<TokenRun> runs_of(ContextSplit split, std::int64_t seq_len) {
  std::vector<TokenRun> runs;
  for (const SeqRange& r : split.runs(seq_len)) runs.push_back({r.begin, r.count});
  return runs;
}

std::shared_ptr<const Loader> loader(std::int64_t seq_len, std::vector<TokenRun> runs) {
  auto tokens = std::make_shared<std::vector<std::int32_t>>(997);
  std::iota(tokens->begin(), tokens->end(), 1000);
  return std::make_shared<const Loader>(memory_source(std::move(tokens)),
                                        LoaderOptions{seq_len, 7, true, 0, 1, std::move(runs)});
}

TEST(ContextData, TheRanksRunsReassembleEveryWindow) {
  const std::int64_t seq = 24;
  const auto whole = loader(seq, {});
  for (int cp : {2, 3, 4}) {
    std::vector<std::shared_ptr<const Loader>> ranks;
    for (int r = 0; r < cp; ++r) ranks.push_back(loader(seq, runs_of({cp, r}, seq)));
    for (std::uint64_t sample = 0; sample < 50; ++sample) {
      std::vector<std::int32_t> inputs(seq), targets(seq), got_in(seq, -1), got_tg(seq, -1);
      whole->read_sample(sample, inputs.data(), targets.data());
      for (int r = 0; r < cp; ++r) {
        ASSERT_EQ(ranks[r]->options().sample_tokens(), seq / cp);
        std::vector<std::int32_t> in(seq / cp), tg(seq / cp);
        ranks[r]->read_sample(sample, in.data(), tg.data());
        std::int64_t at = 0;
        for (const SeqRange& run : ContextSplit{cp, r}.runs(seq))
          for (std::int64_t p = run.begin; p < run.begin + run.count; ++p, ++at) {
            got_in[p] = in[at];
            got_tg[p] = tg[at];
          }
      }
      EXPECT_EQ(got_in, inputs) << "cp " << cp << " sample " << sample;
      EXPECT_EQ(got_tg, targets) << "cp " << cp << " sample " << sample;
    }
  }
}

TEST(ContextData, PrefetchedBatchesHoldTheRunsOfTheSameSamples) {
  const std::int64_t seq = 16, batch = 3;
  const auto runs = runs_of({2, 1}, seq);
  const auto part = loader(seq, runs);
  BatchPrefetcher prefetcher(part, batch, 2);
  for (int step = 0; step < 4; ++step) {
    const std::uint64_t first_sample = prefetcher.position();
    const TokenBatch b = prefetcher.next();
    ASSERT_EQ(b.ids.size(), static_cast<std::size_t>(batch * seq / 2));
    for (std::int64_t s = 0; s < batch; ++s) {
      std::vector<std::int32_t> in(seq / 2), tg(seq / 2);
      part->read_sample(first_sample + static_cast<std::uint64_t>(s), in.data(), tg.data());
      EXPECT_TRUE(std::equal(in.begin(), in.end(), b.ids.begin() + s * seq / 2));
      EXPECT_TRUE(std::equal(tg.begin(), tg.end(), b.targets.begin() + s * seq / 2));
    }
  }
}

}  // namespace
}  // namespace ustrain
