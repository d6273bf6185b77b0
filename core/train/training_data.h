// The trainer's view of the data: this process's training stream and the fixed validation
// batches, as host micro-batches of (micro_batch, seq_len) token ids, made ahead of time on a
// background thread so that a step does not wait for them (data/prefetcher.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/recipe/recipe.h"
#include "data/blend.h"
#include "data/prefetcher.h"
#include "parallel/context_split.h"

namespace ustrain {

class TrainingData {
 public:
  // Opens the dataset of data.path, or the datasets of data.blend, and checks them against
  // the recipe before anything is read: tokenizer kind and identity (all blended datasets
  // share one), vocabulary size, checksums (data.verify), enough tokens for one sequence, a
  // validation split when validation is on. This process is data-parallel reader `reader`
  // of `num_readers` (data/loader.h) and holds the `context` part of every sequence (its two
  // runs under context parallelism; micro-batches are then (micro_batch, seq_len / cp)).
  // With train.document_mask every micro-batch carries its tokens' document ids.
  explicit TrainingData(const Recipe& recipe, int reader = 0, int num_readers = 1, ContextSplit context = {});

  // The next micro-batch; valid until the next call.
  TokenBatch next_train();
  // The training stream's position as opaque text (JSON), for checkpoints; restore() makes
  // the next next_train() return exactly the batch that followed when state() was taken, and
  // state() then returns the same text. The position is global (samples taken by all readers
  // together), so a run may resume with another number of readers that divides it. A
  // position that does not match the `tokens_seen` of its checkpoint (one sample is seq_len
  // tokens) is refused: it would resume on other data.
  std::string state() const;
  void restore(const std::string& state, std::int64_t tokens_seen);
  void reset_validation();
  TokenBatch next_validation();

  std::int64_t train_tokens() const { return train_tokens_; }
  std::int64_t validation_tokens() const { return validation_tokens_; }
  // Sequences of seq_len the validation split holds (all readers together): more validation
  // micro-batches than these hold read some twice.
  std::int64_t validation_windows() const { return validation_windows_; }
  // Cross-entropy (nats/token) of the validation data under the training data's unigram
  // distribution (add-one smoothed; counted over at most 8 M tokens per split, spread
  // evenly): the loss a model that ignores context would reach.
  double unigram_validation_loss() const { return unigram_val_loss_; }

 private:
  std::int64_t seq_len_;
  std::uint64_t seed_;
  int num_readers_;
  std::string state_sources_;  // the part of state() that names the data, to check on restore
  std::unique_ptr<BatchPrefetcher> train_, val_;
  std::int64_t train_tokens_ = 0, validation_tokens_ = 0, validation_windows_ = 0;
  double unigram_val_loss_ = 0;
};

// The datasets a recipe trains on: data.blend parsed, or data.path with weight 1.
std::vector<BlendEntry> recipe_datasets(const DataSection& data);

}  // namespace ustrain
