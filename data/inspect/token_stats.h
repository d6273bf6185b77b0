// How often each token id occurs in a stream: exactly for streams up to a limit, else from
// blocks spread evenly over the stream (a sample that reads a bounded amount of data).
#pragma once

#include <cstdint>
#include <vector>

#include "data/shards/token_source.h"

namespace ustrain {

struct TokenCounts {
  std::vector<std::uint64_t> counts;  // per id, vocab_size entries
  std::uint64_t total = 0;            // tokens counted
  bool sampled = false;               // false: every token of the stream was counted
};

// Counts the ids of `tokens` (all below vocab_size); reads at most about max_tokens of them.
TokenCounts count_tokens(const TokenSource& tokens, std::int64_t vocab_size, std::int64_t max_tokens);

// Shannon entropy of the counted distribution, in bits per token.
double entropy_bits(const TokenCounts& counts);

}  // namespace ustrain
