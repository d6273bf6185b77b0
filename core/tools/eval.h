// Validation loss: the trainer's periodic evaluation and `ustrain eval`.
#pragma once

#include <cstdint>
#include <string>

#include "core/checkpoint/reader.h"
#include "core/model/llama.h"
#include "core/recipe/recipe.h"
#include "core/train/training_data.h"

namespace ustrain {

// Mean loss (nats per token) of the whole `model` on one process over the validation set:
// train.eval_batches batches of train.global_batch sequences from the start of the split, in
// `micro_batches` micro-batches of (micro_batch, seq_len) tokens. The trainer validates on
// the same sequences whatever the layout, each data-parallel rank its share, through its
// pipeline (core/train/trainer.cpp), so `ustrain eval` gives the number the training run logged.
double validation_loss(LlamaModel& model, Backend& backend, TrainingData& data, std::int64_t micro_batch,
                       std::int64_t seq_len, std::int64_t micro_batches);

// Warns of each model key the recipe sets otherwise than the checkpoint's training recipe (a
// shape difference fails later, naming the tensor; the other keys change the numbers).
void warn_model_changes(const CheckpointReader& checkpoint, const Recipe& recipe);

struct EvalOptions {
  std::string checkpoint;    // a checkpoint directory, or a run directory (its newest checkpoint)
  std::int64_t batches = 0;  // batches of train.global_batch sequences; 0: the recipe's train.eval_batches
};

struct EvalResult {
  double loss = 0;        // nats per token
  double perplexity = 0;  // exp(loss)
  std::int64_t tokens = 0;
  std::int64_t step = 0;  // the checkpoint's step
  std::string checkpoint; // the directory that was evaluated
};

// Loads the checkpoint's weights into the recipe's model and measures the validation loss on
// the recipe's dataset. UserError when the checkpoint was written for another model shape or
// trained with another tokenizer than the dataset's, or the dataset has no validation split.
EvalResult evaluate_checkpoint(const Recipe& recipe, const EvalOptions& options);

}  // namespace ustrain
