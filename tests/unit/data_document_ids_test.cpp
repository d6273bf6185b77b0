// Document ids of packed windows (data/document_ids.h) and the loader that supplies them
// (data/loader.h): a document ends with its end-of-document token, inclusive; the ids are a
// function of the window's own tokens, read from nothing outside it, and a part of a window
// (context parallelism's runs) gets the whole window's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "data/document_ids.h"
#include "data/loader.h"
#include "data/prefetcher.h"

namespace ustrain {
namespace {

constexpr std::int32_t kEos = 99;

std::vector<std::int32_t> numbered(const std::vector<std::int32_t>& window) {
  std::vector<std::int32_t> documents(window.size());
  number_documents(window, kEos, documents);
  return documents;
}

TEST(DocumentIds, EachDocumentEndsWithItsEndOfDocumentToken) {
  EXPECT_EQ(numbered({5, kEos, 7, 8, kEos, kEos, 3}), (std::vector<std::int32_t>{0, 0, 1, 1, 1, 2, 3}));
  EXPECT_EQ(numbered({kEos, kEos}), (std::vector<std::int32_t>{0, 1}));  // documents of one token
  EXPECT_EQ(numbered({1, 2, 3}), (std::vector<std::int32_t>{0, 0, 0}));  // one document
}

// A stream that records the lowest and highest position read.
class WatchedTokens final : public TokenSource {
 public:
  explicit WatchedTokens(std::vector<std::int32_t> tokens) : tokens_(std::move(tokens)) {}
  std::int64_t size() const override { return static_cast<std::int64_t>(tokens_.size()); }
  void read(std::int64_t first, std::int64_t count, std::int32_t* out) const override {
    lowest = std::min<std::int64_t>(lowest, first);
    highest = std::max<std::int64_t>(highest, first + count - 1);
    std::copy(tokens_.begin() + first, tokens_.begin() + first + count, out);
  }
  void reset() const { lowest = size(), highest = -1; }
  mutable std::atomic<std::int64_t> lowest{0}, highest{0};

 private:
  std::vector<std::int32_t> tokens_;
};

// 8 windows of 12 tokens; an EOS every 5th token, so documents straddle windows.
std::shared_ptr<WatchedTokens> packed_stream() {
  std::vector<std::int32_t> tokens(8 * 12 + 1);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = i % 5 == 4 ? kEos : static_cast<std::int32_t>(i % 50);
  return std::make_shared<WatchedTokens>(std::move(tokens));
}

TEST(DocumentIds, TheLoaderNumbersEachWindowFromItsOwnTokensOnly) {
  const auto stream = packed_stream();
  const Loader loader({{stream, 1.0, "packed"}}, {12, 7, /*shuffle=*/true, 0, 1, {}, kEos});
  std::vector<std::int32_t> inputs(12), targets(12), documents(12);
  for (std::uint64_t sample = 0; sample < 8; ++sample) {
    stream->reset();
    loader.read_sample(sample, inputs.data(), targets.data(), documents.data());
    const std::int64_t start = static_cast<std::int64_t>(loader.origin(sample).window) * 12;
    EXPECT_EQ(stream->lowest.load(), start) << "sample " << sample;
    EXPECT_EQ(stream->highest.load(), start + 12) << "sample " << sample;  // the last target
    EXPECT_EQ(documents, numbered(inputs)) << "sample " << sample;
    EXPECT_EQ(documents.front(), 0);  // a document that began in the window before is this window's first
  }
}

TEST(DocumentIds, AContextParallelPartHasTheWholeWindowsIds) {
  const auto stream = packed_stream();
  const Loader whole({{stream, 1.0, "packed"}}, {12, 7, true, 0, 1, {}, kEos});
  // Rank 1 of cp = 2 (zig-zag): chunks 1 and 2 of four chunks of 3 tokens; its ring meets the
  // keys of the whole window, so it gets every position's document.
  const Loader part({{stream, 1.0, "packed"}}, {12, 7, true, 0, 1, {{3, 3}, {6, 3}}, kEos});
  std::vector<std::int32_t> inputs(12), targets(12), documents(12), run_inputs(6), run_targets(6), run_documents(12);
  for (std::uint64_t sample = 0; sample < 8; ++sample) {
    whole.read_sample(sample, inputs.data(), targets.data(), documents.data());
    stream->reset();
    part.read_sample(sample, run_inputs.data(), run_targets.data(), run_documents.data());
    const std::int64_t start = static_cast<std::int64_t>(whole.origin(sample).window) * 12;
    EXPECT_GE(stream->lowest.load(), start);
    EXPECT_LE(stream->highest.load(), start + 12);
    EXPECT_EQ(run_documents, documents) << "sample " << sample;
    EXPECT_TRUE(std::equal(run_inputs.begin(), run_inputs.end(), inputs.begin() + 3));
  }
}

TEST(DocumentIds, BatchesCarryThemOnlyWhenAsked) {
  const auto stream = packed_stream();
  BatchPrefetcher plain(std::make_shared<const Loader>(std::vector<LoaderSource>{{stream, 1.0, "p"}},
                                                       LoaderOptions{12, 7, true, 0, 1, {}}),
                        2, 1);
  EXPECT_TRUE(plain.next().documents.empty());
  BatchPrefetcher masked(std::make_shared<const Loader>(std::vector<LoaderSource>{{stream, 1.0, "p"}},
                                                        LoaderOptions{12, 7, true, 0, 1, {}, kEos}),
                         2, 1);
  for (int batch = 0; batch < 3; ++batch) {
    const TokenBatch tokens = masked.next();
    ASSERT_EQ(tokens.documents.size(), 24u);
    for (std::size_t b = 0; b < 2; ++b) {
      const std::vector<std::int32_t> window(tokens.ids.begin() + b * 12, tokens.ids.begin() + (b + 1) * 12);
      EXPECT_TRUE(std::equal(tokens.documents.begin() + b * 12, tokens.documents.begin() + (b + 1) * 12,
                             numbered(window).begin()));
    }
  }
}

}  // namespace
}  // namespace ustrain
