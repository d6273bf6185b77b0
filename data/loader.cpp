#include "data/loader.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/portable_random.h"
#include "kernels/error.h"

namespace ustrain {

Loader::Loader(std::shared_ptr<const std::vector<std::int32_t>> tokens, std::int64_t seq_len,
               std::uint64_t seed, bool shuffle, int reader, int num_readers)
    : tokens_(std::move(tokens)), seq_len_(seq_len), seed_(seed), shuffle_(shuffle),
      reader_(reader), num_readers_(num_readers) {
  USTRAIN_ASSERT(tokens_ != nullptr, "Loader needs a token stream");
  USTRAIN_ASSERT(seq_len_ > 0, "seq_len must be positive");
  USTRAIN_ASSERT(num_readers_ > 0 && reader_ >= 0 && reader_ < num_readers_, "reader out of range");
  const auto stream = static_cast<std::int64_t>(tokens_->size());
  if (stream < seq_len_ + 1)
    throw UserError(fmt::format("the token stream has {} tokens, fewer than one sample of seq_len + 1 "
                                "= {}: use a shorter seq_len or more data",
                                stream, seq_len_ + 1));
  windows_ = (stream - 1) / seq_len_;
  windows_per_reader_ = windows_ / num_readers_;
  if (windows_per_reader_ == 0)
    throw UserError(fmt::format("the token stream holds {} samples of seq_len {}, fewer than the {} "
                                "data readers: use a shorter seq_len, fewer ranks or more data",
                                windows_, seq_len_, num_readers_));
  start_epoch(0);
}

void Loader::start_epoch(std::uint64_t epoch) {
  const auto total = static_cast<std::uint64_t>(windows_);
  std::vector<std::uint64_t> permutation;
  if (shuffle_) permutation = portable_permutation(total, SplitMix64::derive(seed_, epoch));
  order_.resize(static_cast<std::size_t>(windows_per_reader_));
  for (std::size_t i = 0; i < order_.size(); ++i) {
    const std::uint64_t position = static_cast<std::uint64_t>(reader_) + i * static_cast<std::uint64_t>(num_readers_);
    order_[i] = shuffle_ ? permutation[position] : position;
  }
  state_ = {epoch, 0};
}

void Loader::next(std::int32_t* inputs, std::int32_t* targets, std::int64_t batch) {
  const auto seq = static_cast<std::size_t>(seq_len_);
  for (std::int64_t b = 0; b < batch; ++b) {
    if (state_.index == order_.size()) start_epoch(state_.epoch + 1);
    const std::int32_t* window = tokens_->data() + order_[state_.index++] * seq;
    std::copy(window, window + seq, inputs + b * seq_len_);
    std::copy(window + 1, window + 1 + seq, targets + b * seq_len_);
  }
}

void Loader::restore(const LoaderState& state) {
  if (state.index > static_cast<std::uint64_t>(windows_per_reader_))
    throw UserError(fmt::format("saved data position {} lies beyond the {} samples per epoch of this "
                                "reader: the dataset, seq_len or number of data-parallel ranks "
                                "changed since it was saved",
                                state.index, windows_per_reader_));
  if (state.epoch != state_.epoch) start_epoch(state.epoch);
  state_ = state;
}

}  // namespace ustrain
