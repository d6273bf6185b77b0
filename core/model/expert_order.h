// Tokens in expert order: the dropless permutation a mixture-of-experts layer runs its experts
// on. Every choice of every token gets a slot (no capacity, nothing dropped); the slots are
// grouped by expert, in expert order, and within an expert by token, so the order depends only
// on the routing, never on how tokens are split over ranks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ustrain {

struct ExpertOrder {
  std::vector<std::int64_t> counts;      // (E) slots of each expert
  std::vector<std::int64_t> offsets;     // (E + 1) where each expert's slots begin; the last is N k
  std::vector<std::int32_t> slot_token;  // (N k) the token each slot holds
  std::vector<std::int32_t> token_slot;  // (N k) the slot of token t's choice j, at t k + j
};

// From the chosen experts (N, k) of N tokens, row-major, each in [0, n_experts).
ExpertOrder expert_order(std::span<const std::int32_t> experts, std::int64_t n_experts, std::int64_t k);

}  // namespace ustrain
