// The planner's layouts are planned on several threads at once: the answer is the same as on
// one, layout by layout, and a refusal in a worker reaches the caller.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>

#include "core/plan/parallel_for.h"
#include "core/plan/planner.h"
#include "core/recipe/recipe.h"

namespace ustrain {
namespace {

Plan plan_on(int threads) {
  Recipe recipe = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/quickstart.toml", {"model.vocab_size=257"});
  PlanOptions o;
  o.devices = 8;
  o.threads = threads;
  return plan_layouts(recipe, o);
}

TEST(PlanThreads, TwoThreadsGiveWhatOneGives) {
  const Plan one = plan_on(1), two = plan_on(2);
  ASSERT_EQ(one.layouts.size(), two.layouts.size());
  ASSERT_GT(one.layouts.size(), 100u);
  for (std::size_t i = 0; i < one.layouts.size(); ++i) {
    const PlannedLayout &a = one.layouts[i], &b = two.layouts[i];
    EXPECT_EQ(a.layout.overrides(), b.layout.overrides()) << i;
    EXPECT_EQ(a.memory.bytes, b.memory.bytes) << a.layout.str();
    EXPECT_EQ(a.time.step_s, b.time.step_s) << a.layout.str();
  }
  EXPECT_EQ(one.recorded_steps, two.recorded_steps);
}

TEST(PlanThreads, TheFirstFailureIsRethrownAndStopsTheRest) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_for(
                   1000, 2,
                   [&](std::size_t i) {
                     ++ran;
                     if (i == 3) throw std::runtime_error("refused");
                     // Work that takes time, as a layout's plan does: the rest of the 1000
                     // items would take a second, far longer than the failure takes to stop them.
                     std::this_thread::sleep_for(std::chrono::milliseconds(1));
                   },
                   {}),
               std::runtime_error);
  EXPECT_LT(ran.load(), 1000);
}

}  // namespace
}  // namespace ustrain
