#include "core/eval/choice_scores.h"

#include <algorithm>

namespace ustrain {

double row_log_prob(const float* losses, std::int64_t tokens) {
  double sum = 0;
  for (std::int64_t i = 0; i < tokens; ++i) sum += losses[i];
  return -sum;
}

std::vector<double> choice_log_probs(LlamaModel& model, Backend& backend, const ScoringRows& rows,
                                     std::int64_t micro_batch) {
  std::vector<double> log_probs;
  std::vector<std::int32_t> ids, targets;
  std::vector<float> losses;
  for (std::int64_t first = 0; first < rows.rows(); first += micro_batch) {
    const std::int64_t batch = std::min(micro_batch, rows.rows() - first);
    const auto lengths = std::span(rows.lengths).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(batch));
    // Causal attention: a row's losses do not depend on the padding after it, so the batch is
    // cut to its longest row.
    const std::int64_t seq = *std::max_element(lengths.begin(), lengths.end());
    ids.resize(static_cast<std::size_t>(batch * seq));
    targets.resize(ids.size());
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto from = static_cast<std::size_t>((first + b) * rows.seq);
      const auto to = static_cast<std::size_t>(b * seq);
      std::copy_n(rows.ids.begin() + static_cast<std::ptrdiff_t>(from), seq, ids.begin() + static_cast<std::ptrdiff_t>(to));
      std::copy_n(rows.targets.begin() + static_cast<std::ptrdiff_t>(from), seq,
                  targets.begin() + static_cast<std::ptrdiff_t>(to));
    }
    model.forward(backend, {ids, targets}, batch, seq);
    // The forward's per-token losses: the first row of the model's kept losses.
    const Tensor kept = model.kept_losses();
    losses.resize(ids.size());
    backend.copy(Tensor(losses.data(), Shape{batch * seq}), Tensor(kept.data, Shape{batch * seq}, DType::f32, kept.device));
    for (std::int64_t b = 0; b < batch; ++b) log_probs.push_back(row_log_prob(losses.data() + b * seq, seq));
  }
  return log_probs;
}

}  // namespace ustrain
