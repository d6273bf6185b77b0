#include "core/model/sequence_balance.h"

#include <algorithm>
#include <string>

#include "kernels/error.h"

namespace ustrain {

std::vector<float> sequence_choices(std::span<const std::int32_t> chosen, std::int64_t batch, std::int64_t n_experts,
                                    std::int64_t top_k) {
  const auto choices = static_cast<std::int64_t>(chosen.size());
  USTRAIN_ASSERT(batch > 0 && top_k > 0 && choices % (batch * top_k) == 0,
                 "choices of " + std::to_string(batch) + " sequences of top-" + std::to_string(top_k));
  const std::int64_t per_seq = choices / batch;  // T k
  std::vector<float> counts(static_cast<std::size_t>(batch * n_experts), 0.0f);
  for (std::int64_t b = 0, c = 0; b < batch; ++b) {
    float* row = counts.data() + b * n_experts;  // (E)
    for (const std::int64_t end = c + per_seq; c < end; ++c) {
      const std::int32_t e = chosen[static_cast<std::size_t>(c)];
      USTRAIN_ASSERT(e >= 0 && e < n_experts, "expert " + std::to_string(e) + " of " + std::to_string(n_experts));
      row[e] += 1.0f;
    }
  }
  return counts;
}

SequenceBalance sequence_balance(std::span<const float> choices, std::span<const float> probs, std::int64_t batch,
                                 std::int64_t n_experts, std::int64_t top_k, bool sigmoid, double alpha,
                                 double loss_grad) {
  const std::int64_t E = n_experts, n = static_cast<std::int64_t>(probs.size()) / E, len = n / batch;
  USTRAIN_ASSERT(static_cast<std::int64_t>(choices.size()) == batch * E && n % batch == 0,
                 "sequence balance of " + std::to_string(batch) + " sequences, " + std::to_string(E) + " experts");
  SequenceBalance out{std::vector<float>(choices.size()), 0.0};
  std::vector<double> score_sum(static_cast<std::size_t>(E));
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* c = choices.data() + b * E;  // (E)
    double total = 0;                         // T k
    for (std::int64_t i = 0; i < E; ++i) total += c[i];
    const double seq_len = total / static_cast<double>(top_k);
    std::fill(score_sum.begin(), score_sum.end(), 0.0);  // this rank's tokens' sum_t s'_{i,t}
    for (std::int64_t t = b * len; t < (b + 1) * len; ++t) {
      const float* p = probs.data() + t * E;  // (E)
      if (!sigmoid) {  // softmax scores already sum to one
        for (std::int64_t i = 0; i < E; ++i) score_sum[static_cast<std::size_t>(i)] += p[i];
        continue;
      }
      double norm = 0;
      for (std::int64_t i = 0; i < E; ++i) norm += p[i];
      for (std::int64_t i = 0; i < E; ++i) score_sum[static_cast<std::size_t>(i)] += p[i] / norm;
    }
    for (std::int64_t i = 0; i < E; ++i) {
      const double f = total > 0 ? static_cast<double>(E) * c[i] / total : 0.0;
      out.score_grad[static_cast<std::size_t>(b * E + i)] = static_cast<float>(alpha * f * loss_grad);
      if (seq_len > 0) out.value += alpha * f * score_sum[static_cast<std::size_t>(i)] / seq_len;
    }
  }
  return out;
}

}  // namespace ustrain
