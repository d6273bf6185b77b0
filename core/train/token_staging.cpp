#include "core/train/token_staging.h"

#include <algorithm>
#include <string>

#include "kernels/error.h"

namespace ustrain {

namespace {

std::size_t count(std::int64_t n) { return static_cast<std::size_t>(std::max<std::int64_t>(n, 0)); }

}  // namespace

TokenStaging::TokenStaging(Backend& backend, std::size_t micro_batches, std::int64_t tokens, const char* what,
                           std::int64_t documents)
    : micro_batches_(micro_batches),
      tokens_(count(tokens)),
      documents_(count(documents)),
      host_(backend.allocate_host_staging(micro_batches_ * stride() * sizeof(std::int32_t), what)) {
  auto* base = static_cast<std::int32_t*>(host_.get());
  views_.reserve(micro_batches_);
  for (std::size_t m = 0; m < micro_batches_; ++m) {
    if (base == nullptr) {
      views_.emplace_back();
      continue;
    }
    const std::int32_t* ids = base + m * stride();
    views_.push_back({{ids, tokens_}, {ids + tokens_, tokens_}});
  }
}

void TokenStaging::put(std::size_t m, const TokenBatch& batch) {
  USTRAIN_ASSERT(m < micro_batches_ && batch.ids.size() == tokens_ && batch.targets.size() == tokens_,
                 "token staging: micro-batch " + std::to_string(m) + " of " + std::to_string(batch.ids.size()) +
                     " tokens into " + std::to_string(micro_batches_) + " places of " + std::to_string(tokens_));
  const bool documents = !batch.documents.empty();
  USTRAIN_ASSERT(!documents || batch.documents.size() == documents_,
                 "token staging: " + std::to_string(batch.documents.size()) + " document ids into a place of " +
                     std::to_string(documents_));
  if (tokens_ == 0) return;
  std::int32_t* ids = static_cast<std::int32_t*>(host_.get()) + m * stride();
  std::copy(batch.ids.begin(), batch.ids.end(), ids);
  std::copy(batch.targets.begin(), batch.targets.end(), ids + tokens_);
  std::copy(batch.documents.begin(), batch.documents.end(), ids + 2 * tokens_);
  // A batch without document ids (a task's rows) is one document per sequence.
  views_[m].documents = std::span<const std::int32_t>(ids + 2 * tokens_, documents ? documents_ : 0);
}

std::span<const TokenBatch> TokenStaging::tokens(std::size_t n) const {
  USTRAIN_ASSERT(n <= micro_batches_, "token staging: " + std::to_string(n) + " micro-batches of " +
                                          std::to_string(micro_batches_));
  return std::span<const TokenBatch>(views_.data(), n);
}

}  // namespace ustrain
