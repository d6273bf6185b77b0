// The trainer's view of the data: this process's training stream and the fixed validation
// batches, as host micro-batches of (micro_batch, seq_len) token ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/recipe.h"
#include "data/dataset.h"
#include "data/loader.h"

namespace ustrain {

struct MicroBatch {
  std::vector<std::int32_t> inputs;   // (B, S)
  std::vector<std::int32_t> targets;  // (B, S), inputs shifted by one token
};

class TrainingData {
 public:
  // Opens recipe.data.path and checks it against the recipe: tokenizer identity, vocabulary
  // size, enough tokens for one sequence, a validation split when validation is on.
  explicit TrainingData(const Recipe& recipe);

  const MicroBatch& next_train();
  // The training stream's position as opaque text (JSON), for checkpoints; restore() makes
  // the next next_train() return exactly the batch that followed when state() was taken.
  std::string state() const;
  void restore(const std::string& state);
  void reset_validation();
  const MicroBatch& next_validation();

  std::int64_t train_tokens() const { return dataset_.tokens(Split::train); }
  std::int64_t validation_tokens() const { return dataset_.tokens(Split::val); }
  // Cross-entropy (nats/token) of the validation split under the train split's unigram
  // distribution (add-one smoothed): the loss a model that ignores context would reach.
  double unigram_validation_loss() const { return unigram_val_loss_; }

 private:
  std::int64_t batch_, seq_len_;
  std::uint64_t seed_;
  TokenDataset dataset_;
  std::unique_ptr<Loader> train_, val_;
  std::shared_ptr<const std::vector<std::int32_t>> val_tokens_;
  MicroBatch buffer_;
  double unigram_val_loss_ = 0;
};

}  // namespace ustrain
