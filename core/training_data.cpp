#include "core/training_data.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "kernels/error.h"

namespace ustrain {

static double unigram_cross_entropy(const std::vector<std::int32_t>& train, const std::vector<std::int32_t>& val,
                                    std::int64_t vocab) {
  if (val.empty()) return std::nan("");
  std::vector<double> counts(static_cast<std::size_t>(vocab), 1.0);  // add-one smoothing
  for (std::int32_t id : train) counts[static_cast<std::size_t>(id)] += 1.0;
  const double total = static_cast<double>(train.size()) + static_cast<double>(vocab);
  double nll = 0;
  for (std::int32_t id : val) nll -= std::log(counts[static_cast<std::size_t>(id)] / total);
  return nll / static_cast<double>(val.size());
}

TrainingData::TrainingData(const Recipe& r)
    : batch_(r.train.micro_batch), seq_len_(r.train.seq_len), seed_(r.run.seed),
      dataset_(TokenDataset::open(r.data.path)) {
  if (dataset_.tokenizer() != r.data.tokenizer)
    throw UserError(fmt::format("dataset {} was tokenized with \"{}\" but the recipe says data.tokenizer = \"{}\"; "
                                "convert the data again or fix the recipe",
                                r.data.path, dataset_.tokenizer(), r.data.tokenizer));
  if (dataset_.vocab_size() > r.model.vocab_size)
    throw UserError(fmt::format("dataset {} has a vocabulary of {} tokens but model.vocab_size = {}; "
                                "set model.vocab_size to at least {}",
                                r.data.path, dataset_.vocab_size(), r.model.vocab_size, dataset_.vocab_size()));
  if (r.train.eval_interval > 0 && dataset_.tokens(Split::val) <= seq_len_)
    throw UserError(fmt::format("dataset {} has no validation split long enough for one sequence of {} tokens; "
                                "convert with a larger --val-fraction or set train.eval_interval = 0",
                                r.data.path, seq_len_));
  auto train_tokens = std::make_shared<const std::vector<std::int32_t>>(dataset_.read_all(Split::train));
  if (static_cast<std::int64_t>(train_tokens->size()) <= seq_len_)
    throw UserError(fmt::format("dataset {} has {} training tokens, fewer than one sequence of {}; "
                                "use more data or a shorter train.seq_len",
                                r.data.path, train_tokens->size(), seq_len_));
  if (dataset_.tokens(Split::val) > 0) {
    val_tokens_ = std::make_shared<const std::vector<std::int32_t>>(dataset_.read_all(Split::val));
    unigram_val_loss_ = unigram_cross_entropy(*train_tokens, *val_tokens_, dataset_.vocab_size());
  }
  train_ = std::make_unique<Loader>(train_tokens, seq_len_, seed_, /*shuffle=*/true);
  buffer_.inputs.resize(static_cast<std::size_t>(batch_ * seq_len_));
  buffer_.targets.resize(buffer_.inputs.size());
  reset_validation();
}

const MicroBatch& TrainingData::next_train() {
  train_->next(buffer_.inputs.data(), buffer_.targets.data(), batch_);
  return buffer_;
}

std::string TrainingData::state() const {
  const LoaderState s = train_->state();
  return nlohmann::json{{"epoch", s.epoch}, {"index", s.index}}.dump();
}

void TrainingData::restore(const std::string& state) {
  try {
    const auto j = nlohmann::json::parse(state);
    train_->restore(LoaderState{j.at("epoch").get<std::uint64_t>(), j.at("index").get<std::uint64_t>()});
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("the saved data-loader position is unreadable ({}): the checkpoint is corrupt",
                                e.what()));
  }
}

void TrainingData::reset_validation() {
  // Validation always reads the same windows from the start of the split, in order.
  if (val_tokens_) val_ = std::make_unique<Loader>(val_tokens_, seq_len_, seed_, /*shuffle=*/false);
}

const MicroBatch& TrainingData::next_validation() {
  USTRAIN_ASSERT(val_ != nullptr, "no validation split");
  val_->next(buffer_.inputs.data(), buffer_.targets.data(), batch_);
  return buffer_;
}

}  // namespace ustrain
