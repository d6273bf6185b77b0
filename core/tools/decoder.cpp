#include "core/tools/decoder.h"

#include <algorithm>

namespace ustrain {

Decoder::Decoder(LlamaModel& model, Backend& be) : model_(model), be_(be), cache_(model, be) {}

Tensor Decoder::next(std::span<const std::int32_t> ids) {
  USTRAIN_ASSERT(!ids.empty(), "decoding needs at least one token");
  const std::int64_t s = model_.geometry().seq;
  windowed_ = static_cast<std::int64_t>(ids.size()) > s;
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
  const std::span<const std::int32_t> fresh = ids.subspan(cached_.size());
  cached_.insert(cached_.end(), fresh.begin(), fresh.end());
  return model_.decode(be_, cache_, fresh.data(), static_cast<std::int64_t>(fresh.size()));
}

}  // namespace ustrain
