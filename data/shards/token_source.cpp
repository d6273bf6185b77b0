#include "data/shards/token_source.h"

#include <algorithm>

#include "kernels/error.h"

namespace ustrain {

MemoryTokens::MemoryTokens(std::shared_ptr<const std::vector<std::int32_t>> tokens) : tokens_(std::move(tokens)) {
  USTRAIN_ASSERT(tokens_ != nullptr, "MemoryTokens needs tokens");
}

void MemoryTokens::read(std::int64_t first, std::int64_t count, std::int32_t* out) const {
  USTRAIN_ASSERT(first >= 0 && count >= 0 && first + count <= size(), "read outside the token stream");
  std::copy_n(tokens_->data() + first, count, out);
}

}  // namespace ustrain
