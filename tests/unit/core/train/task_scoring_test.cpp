// Multiple-choice task scoring (core/eval): the log-probability of each choice against a
// float64 forward of the model written from the Llama definition (core_safetensors_hf_reference),
// and the accuracies' definitions (lm-evaluation-harness's acc and acc_norm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/eval/choice_scores.h"
#include "core/eval/task_rows.h"
#include "core/model/rng.h"
#include "tests/unit/core/checkpoint/safetensors_hf_reference.h"

namespace ustrain {
namespace {

using hf_reference::reference_loss;
using hf_reference::Weights;

// The sum of the float64 model's next-token losses over tokens[1..n) given what precedes each.
// Its loss at a position depends only on the tokens up to it (causal), so the losses of the
// choice's positions are those of the whole sequence less those of the context's.
double reference_losses(const Weights& w, const ModelSection& m, const std::vector<std::int32_t>& tokens,
                        std::size_t positions) {
  if (positions == 0) return 0;
  const std::vector<std::int32_t> ids(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(positions));
  const std::vector<std::int32_t> targets(tokens.begin() + 1, tokens.begin() + static_cast<std::ptrdiff_t>(positions) + 1);
  return reference_loss(w, m, ids, targets, /*rotate_half=*/true) * static_cast<double>(positions);
}

TEST(TaskScoring, ChoiceLogProbsMatchFloat64Forward) {
  const Recipe recipe = hf_reference::interop_recipe(/*tied=*/false);
  const ModelSection& m = recipe.model;
  const std::int64_t seq = m.max_seq_len, micro_batch = 3;
  auto backend = make_backend(Device::cpu, 1);
  LlamaModel model(m, micro_batch, seq, Recompute::none);
  MemoryPlan plan;
  model.plan(plan);
  PlannedMemory memory(plan, *backend);
  model.bind(memory, *backend);
  Weights w;
  for (std::size_t i = 0; i < model.params().specs().size(); ++i) {
    const ParamSpec& s = model.params().specs()[i];
    const Tensor& t = model.params()[static_cast<int>(i)].value;
    fill_normal(t.f32(), static_cast<std::size_t>(t.numel()), hash_string(s.name), s.init_std > 0 ? 0.5 : 0.2);
    if (s.init_std == 0)
      for (std::int64_t k = 0; k < t.numel(); ++k) t.f32()[k] += 1.0f;
    w[s.name].assign(t.f32(), t.f32() + t.numel());
  }

  // Items of byte tokens: short, long (more rows than one micro-batch), and one whose context
  // must be cut from the left (12 + 9 tokens > seq + 1 = 17).
  Rng rng(7);
  const auto tokens = [&](std::size_t n) {
    std::vector<std::int32_t> t(n);
    for (auto& x : t) x = static_cast<std::int32_t>(rng.next_u64() % 257);
    return t;
  };
  ScoringTask task;
  task.items.push_back({tokens(1), {tokens(1), tokens(3)}, {1, 3}, 0});
  task.items.push_back({tokens(5), {tokens(2), tokens(7), tokens(4), tokens(1)}, {2, 7, 4, 1}, 2});
  task.items.push_back({tokens(12), {tokens(9), tokens(2)}, {9, 2}, 1});
  const ScoringRows rows = scoring_rows(task, seq);
  const std::vector<double> ours = choice_log_probs(model, *backend, rows, micro_batch);
  ASSERT_EQ(ours.size(), 8u);

  std::size_t at = 0;
  for (const TaskItem& item : task.items) {
    for (const std::vector<std::int32_t>& choice : item.choices) {
      std::vector<std::int32_t> all = item.context;
      all.insert(all.end(), choice.begin(), choice.end());
      const std::size_t keep = std::min<std::size_t>(all.size(), static_cast<std::size_t>(seq) + 1);
      all.erase(all.begin(), all.end() - static_cast<std::ptrdiff_t>(keep));  // left truncation
      const std::size_t context_positions = all.size() - choice.size() - 1;
      const double want = -(reference_losses(w, m, all, all.size() - 1) - reference_losses(w, m, all, context_positions));
      EXPECT_NEAR(ours[at], want, 1e-5 * std::abs(want) + 1e-5) << "choice " << at;
      ++at;
    }
  }
}

TEST(TaskScoring, AccuracyDefinitions) {
  ScoringTask task;
  // acc picks choice 1 (-2 > -3); acc_norm divides by bytes: -3/10 > -2/2, so choice 0.
  task.items.push_back({{1}, {{1}, {1}}, {10, 2}, 0});
  // A tie goes to the first best choice: 0 for both, the answer 1 counts for neither.
  task.items.push_back({{1}, {{1}, {1}}, {4, 4}, 1});
  // Both pick choice 2.
  task.items.push_back({{1}, {{1}, {1}, {1}}, {1, 1, 1}, 2});
  const std::vector<double> log_probs{-3, -2, -1, -1, -5, -4, -0.5};
  const TaskScore s = task_score(task, log_probs);
  EXPECT_EQ(s.n, 3);
  EXPECT_DOUBLE_EQ(s.acc, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.acc_norm, 2.0 / 3.0);
}

TEST(TaskScoring, RowsHoldTheChoiceTokensAsTargets) {
  ScoringTask task;
  task.items.push_back({{10, 11, 12}, {{20, 21}}, {2}, 0});
  task.items.push_back({{10, 11, 12, 13, 14}, {{30, 31, 32}}, {3}, 0});  // 8 tokens > seq + 1 = 5
  const ScoringRows rows = scoring_rows(task, 4);
  ASSERT_EQ(rows.rows(), 2);
  EXPECT_EQ(rows.lengths, (std::vector<std::int64_t>{4, 4}));
  EXPECT_EQ(rows.ids, (std::vector<std::int32_t>{10, 11, 12, 20, 13, 14, 30, 31}));
  EXPECT_EQ(rows.targets, (std::vector<std::int32_t>{-1, -1, 20, 21, -1, 30, 31, 32}));
}

}  // namespace
}  // namespace ustrain
