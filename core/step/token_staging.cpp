#include "core/step/token_staging.h"

#include <algorithm>
#include <string>

#include "kernels/error.h"

namespace ustrain {

TokenStaging::TokenStaging(Backend& backend, std::size_t micro_batches, std::int64_t tokens, const char* what)
    : micro_batches_(micro_batches),
      tokens_(static_cast<std::size_t>(std::max<std::int64_t>(tokens, 0))),
      host_(backend.allocate_host_staging(micro_batches_ * 2 * tokens_ * sizeof(std::int32_t), what)) {
  auto* base = static_cast<std::int32_t*>(host_.get());
  views_.reserve(micro_batches_);
  for (std::size_t m = 0; m < micro_batches_; ++m) {
    if (base == nullptr) {
      views_.emplace_back();
      continue;
    }
    const std::int32_t* ids = base + m * 2 * tokens_;
    views_.push_back({{ids, tokens_}, {ids + tokens_, tokens_}});
  }
}

void TokenStaging::put(std::size_t m, const TokenBatch& batch) {
  USTRAIN_ASSERT(m < micro_batches_ && batch.ids.size() == tokens_ && batch.targets.size() == tokens_,
                 "token staging: micro-batch " + std::to_string(m) + " of " + std::to_string(batch.ids.size()) +
                     " tokens into " + std::to_string(micro_batches_) + " places of " + std::to_string(tokens_));
  if (tokens_ == 0) return;
  std::int32_t* ids = static_cast<std::int32_t*>(host_.get()) + m * 2 * tokens_;
  std::copy(batch.ids.begin(), batch.ids.end(), ids);
  std::copy(batch.targets.begin(), batch.targets.end(), ids + tokens_);
}

std::span<const TokenBatch> TokenStaging::tokens(std::size_t n) const {
  USTRAIN_ASSERT(n <= micro_batches_, "token staging: " + std::to_string(n) + " micro-batches of " +
                                          std::to_string(micro_batches_));
  return std::span<const TokenBatch>(views_.data(), n);
}

}  // namespace ustrain
