#include "core/eval/task_rows.h"

#include <algorithm>

#include "kernels/error.h"

namespace ustrain {

ScoringRows scoring_rows(const ScoringTask& task, std::int64_t seq) {
  ScoringRows rows;
  rows.seq = seq;
  std::vector<std::int32_t> tokens;
  for (const TaskItem& item : task.items) {
    for (const std::vector<std::int32_t>& choice : item.choices) {
      tokens.assign(item.context.begin(), item.context.end());
      tokens.insert(tokens.end(), choice.begin(), choice.end());
      // Inputs predict the next token: a row of seq inputs covers seq + 1 tokens.
      const auto total = static_cast<std::int64_t>(tokens.size());
      const std::int64_t start = std::max<std::int64_t>(0, total - (seq + 1));
      const std::int64_t first_target = total - static_cast<std::int64_t>(choice.size());  // in `tokens`
      USTRAIN_ASSERT(first_target > start, "a choice with no context before it");
      const std::int64_t length = total - start - 1;
      const std::size_t row = rows.ids.size();
      rows.ids.resize(row + static_cast<std::size_t>(seq), 0);
      rows.targets.resize(row + static_cast<std::size_t>(seq), -1);
      for (std::int64_t i = 0; i < length; ++i) {
        const std::int64_t t = start + i;
        rows.ids[row + static_cast<std::size_t>(i)] = tokens[static_cast<std::size_t>(t)];
        if (t + 1 >= first_target) rows.targets[row + static_cast<std::size_t>(i)] = tokens[static_cast<std::size_t>(t + 1)];
      }
      rows.lengths.push_back(length);
    }
  }
  return rows;
}

TaskScore task_score(const ScoringTask& task, std::span<const double> log_probs) {
  TaskScore score;
  std::size_t at = 0;
  std::int64_t right = 0, right_norm = 0;
  for (const TaskItem& item : task.items) {
    std::size_t best = 0, best_norm = 0;
    for (std::size_t c = 0; c < item.choices.size(); ++c) {
      const double lp = log_probs[at + c];
      const double norm = lp / static_cast<double>(item.choice_bytes[c]);
      // Strictly greater: a tie keeps the earlier choice.
      if (lp > log_probs[at + best]) best = c;
      if (norm > log_probs[at + best_norm] / static_cast<double>(item.choice_bytes[best_norm])) best_norm = c;
    }
    at += item.choices.size();
    right += static_cast<std::int64_t>(best) == item.answer;
    right_norm += static_cast<std::int64_t>(best_norm) == item.answer;
  }
  USTRAIN_ASSERT(at == log_probs.size(), "log-probabilities of another task");
  score.n = static_cast<std::int64_t>(task.items.size());
  score.acc = static_cast<double>(right) / static_cast<double>(score.n);
  score.acc_norm = static_cast<double>(right_norm) / static_cast<double>(score.n);
  return score;
}

}  // namespace ustrain
