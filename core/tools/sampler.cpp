#include "core/tools/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/error.h"

namespace ustrain {

namespace {

// Larger logit first; among equal logits the lower id. NaN never beats a number.
bool ranks_before(const float* logits, std::int32_t a, std::int32_t b) {
  const float la = logits[a], lb = logits[b];
  if (std::isnan(la) != std::isnan(lb)) return std::isnan(lb);
  if (la != lb && !std::isnan(la)) return la > lb;
  return a < b;
}

std::int32_t argmax(const float* logits, std::int64_t vocab) {
  std::int32_t best = 0;
  for (std::int32_t i = 1; i < vocab; ++i)
    if (ranks_before(logits, i, best)) best = i;
  return best;
}

// Ids of the top_k largest logits (all ids when top_k is 0 or covers the vocabulary), ascending.
std::vector<std::int32_t> candidate_ids(const float* logits, std::int64_t vocab,
                                        std::int64_t top_k) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  if (top_k > 0 && top_k < vocab) {
    std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(),
                      [&](std::int32_t a, std::int32_t b) { return ranks_before(logits, a, b); });
    ids.resize(static_cast<std::size_t>(top_k));
    std::sort(ids.begin(), ids.end());
  }
  return ids;
}

}  // namespace

std::int32_t sample_token(const float* logits, std::int64_t vocab, const SamplingConfig& config,
                          double u) {
  USTRAIN_ASSERT(vocab >= 1 && vocab <= INT32_MAX, "vocabulary size out of range");
  USTRAIN_ASSERT(u >= 0.0 && u < 1.0, "u must be a uniform in [0, 1)");
  if (!(config.temperature >= 0))
    throw UserError("temperature: must be 0 (greedy) or more, got " +
                    std::to_string(config.temperature));
  if (config.top_k < 0)
    throw UserError("top_k: must be 0 (all tokens) or more, got " + std::to_string(config.top_k));

  if (config.temperature == 0 || config.top_k == 1) return argmax(logits, vocab);

  const std::vector<std::int32_t> ids = candidate_ids(logits, vocab, config.top_k);
  // Subtracting the largest logit keeps every exponent <= 0: no overflow, and with finite
  // logits the top candidate has weight 1, so the total is never 0.
  const double max_logit = logits[argmax(logits, vocab)];
  std::vector<double> weights(ids.size());
  double total = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const double w = std::exp((logits[ids[i]] - max_logit) / config.temperature);
    weights[i] = std::isnan(w) ? 0.0 : w;
    total += weights[i];
  }

  const double target = u * total;
  double cumulative = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative) return ids[i];
  }
  // Rounding can leave target at the very top: take the last candidate with any weight.
  for (std::size_t i = ids.size(); i-- > 0;)
    if (weights[i] > 0) return ids[i];
  return argmax(logits, vocab);
}

}  // namespace ustrain
