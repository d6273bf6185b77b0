// The dropless expert order: every choice gets one slot, slots grouped by expert in token order,
// empty experts and all tokens on one expert included.
#include <gtest/gtest.h>

#include "core/model/expert_order.h"

namespace ustrain {
namespace {

TEST(ExpertOrder, GroupsEveryChoiceByExpertInTokenOrder) {
  // 4 tokens, top-2 of 5 experts; expert 2 gets nothing.
  const std::vector<std::int32_t> experts{3, 0, 0, 4, 3, 1, 0, 3};
  const ExpertOrder o = expert_order(experts, 5, 2);
  EXPECT_EQ(o.counts, (std::vector<std::int64_t>{3, 1, 0, 3, 1}));
  EXPECT_EQ(o.offsets, (std::vector<std::int64_t>{0, 3, 4, 4, 7, 8}));
  EXPECT_EQ(o.slot_token, (std::vector<std::int32_t>{0, 1, 3, 2, 0, 2, 3, 1}));
  for (std::size_t i = 0; i < experts.size(); ++i) {
    const std::int32_t slot = o.token_slot[i];
    EXPECT_EQ(o.slot_token[static_cast<std::size_t>(slot)], static_cast<std::int32_t>(i / 2));
    EXPECT_GE(slot, o.offsets[static_cast<std::size_t>(experts[i])]);
    EXPECT_LT(slot, o.offsets[static_cast<std::size_t>(experts[i]) + 1]);
  }
}

TEST(ExpertOrder, AllTokensOnOneExpert) {
  const std::vector<std::int32_t> experts{2, 2, 2};
  const ExpertOrder o = expert_order(experts, 4, 1);
  EXPECT_EQ(o.counts, (std::vector<std::int64_t>{0, 0, 3, 0}));
  EXPECT_EQ(o.slot_token, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(o.token_slot, (std::vector<std::int32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace ustrain
