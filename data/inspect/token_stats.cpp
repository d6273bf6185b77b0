#include "data/inspect/token_stats.h"

#include <algorithm>
#include <cmath>

#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::int64_t kBlockTokens = 1 << 16;

}  // namespace

TokenCounts count_tokens(const TokenSource& tokens, std::int64_t vocab_size, std::int64_t max_tokens) {
  TokenCounts result;
  result.counts.assign(static_cast<std::size_t>(vocab_size), 0);
  const std::int64_t size = tokens.size();
  const std::int64_t blocks_total = (size + kBlockTokens - 1) / kBlockTokens;
  const std::int64_t blocks = std::min(blocks_total, std::max<std::int64_t>(1, max_tokens / kBlockTokens));
  result.sampled = blocks < blocks_total;
  std::vector<std::int32_t> buffer(kBlockTokens);
  for (std::int64_t b = 0; b < blocks; ++b) {
    // Block b of the sample is block floor(b * total / blocks) of the stream: evenly spread.
    const std::int64_t first = b * blocks_total / blocks * kBlockTokens;
    const std::int64_t count = std::min(kBlockTokens, size - first);
    tokens.read(first, count, buffer.data());
    for (std::int64_t i = 0; i < count; ++i) {
      USTRAIN_ASSERT(buffer[i] >= 0 && buffer[i] < vocab_size, "token id outside the vocabulary");
      ++result.counts[static_cast<std::size_t>(buffer[i])];
    }
    result.total += static_cast<std::uint64_t>(count);
  }
  return result;
}

double entropy_bits(const TokenCounts& counts) {
  if (counts.total == 0) return 0;
  double bits = 0;
  for (std::uint64_t count : counts.counts) {
    if (count == 0) continue;
    const double p = static_cast<double>(count) / static_cast<double>(counts.total);
    bits -= p * std::log2(p);
  }
  return bits;
}

}  // namespace ustrain
