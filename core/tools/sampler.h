// Picking the next token from a row of logits, for `ustrain generate`.
#pragma once

#include <cstdint>

namespace ustrain {

struct SamplingConfig {
  double temperature = 1.0;  // 0 = greedy (argmax)
  std::int64_t top_k = 0;    // 0 = consider every token
};

// Picks a token id in [0, vocab) from `logits` (vocab values). `u` is a uniform in [0, 1)
// from the caller's Rng; the result is a deterministic function of (logits, config, u).
// Greedy ties go to the lowest id, as do ties at the top-k boundary. Sampling walks the
// candidates in ascending id order and returns the first whose cumulative probability
// exceeds u. When the model's vocabulary is padded, pass the real vocabulary size as
// `vocab`: only the first `vocab` logits are read, so padding ids are never chosen.
// Throws UserError for a negative temperature or top_k.
std::int32_t sample_token(const float* logits, std::int64_t vocab, const SamplingConfig& config,
                          double u);

}  // namespace ustrain
