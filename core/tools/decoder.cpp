#include "core/tools/decoder.h"

#include <algorithm>

namespace ustrain {

Decoder::Decoder(LlamaModel& model, Backend& be) : model_(model), be_(be), cache_(model, be) {}

Tensor Decoder::next(std::span<const std::int32_t> ids) {
  USTRAIN_ASSERT(!ids.empty(), "decoding needs at least one token");
  const std::int64_t s = model_.geometry().seq;
  // With a sliding window the cache keeps what the window sees at any position: nothing is cut.
  windowed_ = cache_.window() == 0 && static_cast<std::int64_t>(ids.size()) > s;
  if (windowed_) {  // every position moves: the whole window's forward
    cache_.clear();
    cached_.clear();
    window_.assign(ids.end() - s, ids.end());
    no_targets_.assign(window_.size(), -1);
    model_.forward(be_, {window_, no_targets_}, 1, s);
    return model_.logits().slice(s - 1, s);
  }
  if (cached_.size() >= ids.size() || !std::equal(cached_.begin(), cached_.end(), ids.begin())) {
    cache_.clear();
    cached_.clear();
  }
  std::span<const std::int32_t> fresh = ids.subspan(cached_.size());
  Tensor logits;
  while (!fresh.empty()) {  // in steps the cache takes
    const std::size_t n = std::min(fresh.size(), static_cast<std::size_t>(cache_.step_limit()));
    logits = model_.decode(be_, cache_, fresh.data(), static_cast<std::int64_t>(n));
    cached_.insert(cached_.end(), fresh.begin(), fresh.begin() + static_cast<std::ptrdiff_t>(n));
    fresh = fresh.subspan(n);
  }
  return logits;
}

}  // namespace ustrain
