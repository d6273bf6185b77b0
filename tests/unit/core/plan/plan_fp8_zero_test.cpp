// The planner searches every ZeRO stage in fp8 as in bf16: FP8 layers train at stages 2 and 3
// (core/step/fp8_layers.h), and their memory is bf16's sharding plus the FP8 lines.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/plan/layout_memory.h"
#include "core/plan/layout_space.h"
#include "core/recipe/recipe.h"

namespace ustrain {
namespace {

// The planned bytes of pipeline rank 0 at dp = 4 (no other parallelism), ZeRO stage `zero`, of
// the quickstart recipe in `precision`.
std::size_t dp4_bytes(const std::string& precision, std::int64_t zero, std::set<std::int64_t>& stages) {
  const Recipe base = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/quickstart.toml",
                                  {"train.precision=" + precision});
  LayoutMemoryPlanner planner(gpu_hardware("h100"), 8);
  std::size_t bytes = 0;
  for (const Candidate& c : enumerate_layouts(base, SearchSpace{4, 8, base.train.global_batch, false}).candidates) {
    const Layout& l = c.layout;
    stages.insert(l.zero);
    if (l.dp == 4 && l.zero == zero && l.recompute == "none" && l.micro_batch == base.train.global_batch / 4)
      bytes = planner.of(c.recipe()).rank_bytes.at(0);
  }
  return bytes;
}

TEST(PlanFp8Zero, SearchesEveryStageAndShardsAsBf16Does) {
  std::set<std::int64_t> fp8_stages, bf16_stages;
  const std::size_t fp8_zero1 = dp4_bytes("fp8", 1, fp8_stages), fp8_zero3 = dp4_bytes("fp8", 3, fp8_stages);
  const std::size_t bf16_zero1 = dp4_bytes("bf16", 1, bf16_stages), bf16_zero3 = dp4_bytes("bf16", 3, bf16_stages);
  EXPECT_EQ(fp8_stages, (std::set<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(fp8_stages, bf16_stages);
  ASSERT_GT(fp8_zero3, 0u);
  ASSERT_GT(bf16_zero3, 0u);
  // Stage 3 saves fp8 what it saves bf16 (the FP8 lines do not depend on the stage).
  EXPECT_EQ(fp8_zero1 - fp8_zero3, bf16_zero1 - bf16_zero3);
  EXPECT_LT(fp8_zero3, fp8_zero1);
}

}  // namespace
}  // namespace ustrain
