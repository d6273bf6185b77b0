#include "core/train/task_pass.h"

#include <algorithm>

#include "core/eval/choice_scores.h"

namespace ustrain {
namespace {

// The part of a (seq) row a context-parallel rank holds: its runs, one after the other.
void take_runs(const std::int32_t* row, const ContextSplit& context, std::int64_t seq, std::vector<std::int32_t>& out) {
  for (const SeqRange& r : context.runs(seq)) out.insert(out.end(), row + r.begin, row + r.begin + r.count);
}

}  // namespace

std::vector<double> task_pass(TrainingRank& run, const ScoringRows& rows, const RowShare& share) {
  const std::int64_t batch = run.recipe.train.micro_batch, seq = rows.seq, local = run.geometry.seq;
  const auto micro_batches = static_cast<std::size_t>(run.pipeline.eval.shape.micro_batches);
  const std::int64_t per_reader = static_cast<std::int64_t>(micro_batches) * batch;
  const std::int64_t per_round = per_reader * share.readers;
  std::vector<double> log_probs(static_cast<std::size_t>(rows.rows()), 0.0);
  std::vector<float> losses;
  std::vector<std::int32_t> ids, targets;
  const std::vector<std::int32_t> padding(static_cast<std::size_t>(seq), -1);
  run.eval_executor.set_token_losses(&losses);
  for (std::int64_t round = 0; round < rows.rows(); round += per_round) {
    const std::int64_t first = round + share.reader * per_reader;
    for (std::size_t m = 0; m < micro_batches; ++m) {
      ids.clear();
      targets.clear();
      for (std::int64_t b = 0; b < batch; ++b) {
        const std::int64_t row = first + static_cast<std::int64_t>(m) * batch + b;
        const bool real = row < rows.rows();  // past the last row: padding that scores nothing
        const std::int32_t* row_ids = real ? rows.ids.data() + row * seq : padding.data();
        take_runs(row_ids, share.context, seq, ids);
        take_runs(real ? rows.targets.data() + row * seq : padding.data(), share.context, seq, targets);
      }
      std::replace(ids.begin(), ids.end(), -1, 0);  // padding rows' inputs: any valid token
      run.eval_tokens.put(m, {ids, targets});
    }
    run.eval_executor.run(run.backend, run.eval_tokens.tokens(micro_batches), batch, local, 0.0f);
    for (std::int64_t i = 0; i < per_reader; ++i) {
      const std::int64_t row = first + i;
      if (row >= rows.rows()) break;
      log_probs[static_cast<std::size_t>(row)] = row_log_prob(losses.data() + i * local, local);
    }
  }
  run.eval_executor.set_token_losses(nullptr);
  const Tensor sums(log_probs.data(), Shape{static_cast<std::int64_t>(log_probs.size())}, DType::f64);
  if (run.groups.loss().size() > 1) run.groups.loss().host().all_reduce(sums).wait();
  return log_probs;
}

}  // namespace ustrain
