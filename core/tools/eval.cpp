#include "core/tools/eval.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>

#include "core/checkpoint/compat.h"
#include "core/checkpoint/locate.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/tokenizer.h"
#include "core/train/model_instance.h"
#include "core/train/router_balance.h"
#include "core/recipe/recipe_defaults.h"

namespace ustrain {

double validation_loss(LlamaModel& model, Backend& backend, TrainingData& data, std::int64_t micro_batch,
                       std::int64_t seq_len, std::int64_t micro_batches) {
  data.reset_validation();
  double sum = 0;
  for (std::int64_t b = 0; b < micro_batches; ++b) {
    sum += model.forward(backend, data.next_validation(), micro_batch, seq_len);
  }
  return sum / static_cast<double>(micro_batches * micro_batch * seq_len);
}

void warn_model_changes(const CheckpointReader& checkpoint, const Recipe& recipe) {
  for (const RecipeChange& c : recipe_changes(checkpoint.manifest().recipe, to_toml(recipe)))
    if (c.key.rfind("model.", 0) == 0 && c.kind == RecipeChangeKind::breaks_exactness)
      spdlog::warn("the recipe's model differs from the one the checkpoint was trained with: {} {} -> {}", c.key,
                   c.saved, c.current);
}

EvalResult evaluate_checkpoint(const Recipe& given, const EvalOptions& options) {
  // One process evaluates: an unset parallel.dp is 1.
  const Recipe recipe = with_launch_defaults(with_dataset_defaults(given), dry_run_launch(given, ProcessInfo{}));
  const auto& t = recipe.train;
  const std::int64_t batches = options.batches > 0 ? options.batches : t.eval_batches;
  if (batches < 1) throw UserError("nothing to evaluate: pass --batches N or set train.eval_batches >= 1");
  EvalResult result;
  result.checkpoint = locate_checkpoint(options.checkpoint);
  const CheckpointReader checkpoint(result.checkpoint);
  warn_model_changes(checkpoint, recipe);

  check_dataset_tokenizer(checkpoint, recipe.data);
  TrainingData data(recipe);
  if (data.validation_tokens() <= t.seq_len)
    throw UserError(fmt::format("dataset {} has no validation split long enough for one sequence of {} tokens; "
                                "convert it with a --val-fraction above 0",
                                recipe.data.path, t.seq_len));
  ModelGeometry geometry = ModelGeometry::of(recipe.model, {}, t.seq_len);
  geometry.documents = t.document_mask;  // validation's windows masked as training's were
  ModelInstance instance(recipe, geometry, t.micro_batch, Recompute::none);
  load_model_state(checkpoint, instance.model.params(), *instance.backend, /*with_optimizer=*/false,
                   model_state_of(instance.model, *instance.backend, false));

  // The trainer's validation set: `batches` global batches, read here by one process, and no
  // more than the split holds (more would count some sequences twice).
  // --batches may be any positive int64: a product past int64 asks for more than any split holds.
  std::int64_t sequences = 0;
  const bool beyond = __builtin_mul_overflow(batches, t.global_batch, &sequences);
  std::int64_t micro_batches = beyond ? std::numeric_limits<std::int64_t>::max() : sequences / t.micro_batch;
  const std::int64_t whole = data.validation_windows() / t.micro_batch;
  if (whole == 0)
    throw UserError(fmt::format("the validation split of {} holds {} sequence(s) of {} tokens, fewer than one "
                                "micro-batch of {}; lower it with --set train.micro_batch=N",
                                recipe.data.path, data.validation_windows(), t.seq_len, t.micro_batch));
  if (micro_batches > whole) {
    spdlog::warn("{} batches of {} sequences ask for more than the {} sequences of {} tokens the validation split "
                 "holds: evaluating {} sequences instead, each once",
                 batches, t.global_batch, data.validation_windows(), t.seq_len, whole * t.micro_batch);
    micro_batches = whole;
  }
  result.loss = validation_loss(instance.model, *instance.backend, data, t.micro_batch, t.seq_len, micro_batches);
  result.perplexity = std::exp(result.loss);
  result.tokens = micro_batches * t.micro_batch * t.seq_len;
  result.step = checkpoint.manifest().step;
  return result;
}

}  // namespace ustrain
