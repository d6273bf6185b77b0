#include "core/model/expert_order.h"

#include <string>

#include "kernels/error.h"

namespace ustrain {

ExpertOrder expert_order(std::span<const std::int32_t> experts, std::int64_t n_experts, std::int64_t k) {
  USTRAIN_ASSERT(k >= 1 && experts.size() % static_cast<std::size_t>(k) == 0, "experts of whole tokens");
  ExpertOrder o;
  o.counts.assign(static_cast<std::size_t>(n_experts), 0);
  for (std::int32_t e : experts) {
    USTRAIN_ASSERT(e >= 0 && e < n_experts, "expert " + std::to_string(e) + " out of " + std::to_string(n_experts));
    ++o.counts[static_cast<std::size_t>(e)];
  }
  o.offsets.assign(static_cast<std::size_t>(n_experts) + 1, 0);
  for (std::size_t e = 0; e < o.counts.size(); ++e) o.offsets[e + 1] = o.offsets[e] + o.counts[e];
  std::vector<std::int64_t> next(o.offsets.begin(), o.offsets.end() - 1);
  o.slot_token.resize(experts.size());
  o.token_slot.resize(experts.size());
  // Tokens in order: within an expert, slots come in token order (a stable counting sort).
  const auto choices = static_cast<std::size_t>(k);
  for (std::size_t t = 0, i = 0; i < experts.size(); ++t)
    for (std::size_t j = 0; j < choices; ++j, ++i) {
      const std::int64_t slot = next[static_cast<std::size_t>(experts[i])]++;
      o.slot_token[static_cast<std::size_t>(slot)] = static_cast<std::int32_t>(t);
      o.token_slot[i] = static_cast<std::int32_t>(slot);
    }
  return o;
}

}  // namespace ustrain
