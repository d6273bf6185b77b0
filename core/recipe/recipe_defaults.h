// What a recipe may leave to the run to work out, and the checks of what it sets instead:
//   model.vocab_size = 0, data.tokenizer = "auto"  the dataset's, as its manifest records them
//                                                 (blended datasets share one tokenizer)
//   parallel.dp = 0                               the processes launched / (tp * pp * cp)
// A value the recipe sets must agree: the dataset's tokenizer kind, a vocabulary at least the
// dataset's, a layout that the launch fills. Every rank resolves from the same manifests and
// launch size, so every rank gets the same recipe before the ranks compare theirs
// (core/distributed/rank_agreement.h); the resolved recipe is the one saved with the run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/recipe/recipe.h"
#include "data/loading/blend.h"
#include "data/tokenizers/tokenizer.h"
#include "parallel/launch.h"

namespace ustrain {

struct DatasetTokenizer {
  std::string path;
  TokenizerIdentity tokenizer;
};

// What the manifests of the recipe's datasets say, for `--dry-run`.
struct DatasetFacts {
  TokenizerIdentity tokenizer;  // shared by every dataset
  std::int64_t train_tokens = 0, validation_tokens = 0;
  int datasets = 0;
};

// The datasets a recipe trains on: data.blend parsed, or data.path with weight 1.
std::vector<BlendEntry> recipe_datasets(const DataSection& data);

// Opens the manifests of the recipe's datasets (never their tokens), fills in model.vocab_size
// and data.tokenizer where the recipe leaves them unset, and checks the rest: one tokenizer for
// all, the recipe's kind and vocabulary, a training sequence's worth of tokens in each, a
// validation split when validation is on. UserError naming the dataset and the key otherwise.
Recipe with_dataset_defaults(const Recipe& recipe, DatasetFacts* facts = nullptr);

// parallel.dp from the launch where the recipe leaves it unset; then the recipe's rules again.
// UserError when the processes launched do not divide by the other dimensions.
Recipe with_launch_defaults(const Recipe& recipe, const ProcessInfo& launch);

// Both: the recipe a run of this launch trains with.
Recipe resolve_recipe(const Recipe& recipe, const ProcessInfo& launch);

// For `--dry-run` without a launcher: the launch of dp * tp * pp * cp processes on this host
// (dp = 1 where the recipe leaves it unset), so that the plan and the checks are those of the
// run the layout needs. Under a launcher, `launch`.
ProcessInfo dry_run_launch(const Recipe& recipe, const ProcessInfo& launch);

// One line per key the run filled in, with its value and where it came from.
std::vector<std::string> filled_defaults(const Recipe& given, const Recipe& resolved);

// The tokenizer checks alone (TrainingData makes them too): blended datasets tokenized alike,
// data.tokenizer the datasets' kind, model.vocab_size at least their vocabulary. Unset keys
// are not checked.
void check_dataset_tokenizers(const Recipe& recipe, const std::vector<DatasetTokenizer>& datasets);
// UserError when a dataset holds no training sequence (train.seq_len + 1 tokens).
void check_training_tokens(const Recipe& recipe, const std::string& path, std::int64_t tokens);
// UserError when validation is on but no dataset holds a validation sequence.
void check_validation_tokens(const Recipe& recipe, const std::string& path, bool has_sequence);

}  // namespace ustrain
