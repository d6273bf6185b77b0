// A store lays its parameters out unit by unit: the layout keeps units in UnitId order and each
// unit's parameters in declaration order (matrices first), and planning takes one pass over the
// parameters, not one per unit (a model of many experts has thousands of units and parameters:
// once that took minutes for a --dry-run).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/memory/memory_plan.h"
#include "core/model/param_store.h"

namespace ustrain {
namespace {

ParamDecl decl(const std::string& name, UnitId unit, bool decay, std::int64_t rows) {
  ParamDecl d;
  d.name = name;
  d.shape = Shape{rows, 4};
  d.decay = decay;
  d.unit = unit;
  return d;
}

TEST(ParamStoreUnits, UnitsInIdOrderAndMatricesFirstWithinEach) {
  ParamRegistry registry;
  const int gain1 = registry.declare(decl("gain1", UnitId::layer(1), false, 1));
  const int w1 = registry.declare(decl("w1", UnitId::layer(1), true, 3));
  const int w0 = registry.declare(decl("w0", UnitId::layer(0), true, 2));
  const int emb = registry.declare(decl("emb", UnitId::embedding(), true, 5));
  const int w1b = registry.declare(decl("w1b", UnitId::layer(1), true, 1));
  ParamStore store(registry, SyncGroup::dense);
  MemoryPlan plan;
  store.plan(plan);
  ASSERT_EQ(store.units().size(), 3u);
  EXPECT_EQ(store.units()[0].id, UnitId::embedding());
  EXPECT_EQ(store.units()[1].id, UnitId::layer(0));
  EXPECT_EQ(store.units()[2].id, UnitId::layer(1));
  EXPECT_EQ(store.units()[0].params, std::vector<int>{emb});
  EXPECT_EQ(store.units()[1].params, std::vector<int>{w0});
  EXPECT_EQ(store.units()[2].params, (std::vector<int>{w1, w1b, gain1}));
  EXPECT_EQ(store.unit_index(UnitId::layer(1)), 2);
  EXPECT_EQ(store.unit_index(UnitId::head()), -1);
}

TEST(ParamStoreUnits, PlanningIsLinearInUnitsAndParameters) {
  // 16384 units of one parameter each: one scan of every parameter per unit took 2.7e8 steps
  // (over 10 s); one pass takes milliseconds.
  constexpr int kUnits = 16384;
  ParamRegistry registry;
  for (int l = 0; l < kUnits; ++l) registry.declare(decl("w" + std::to_string(l), UnitId::layer(l), true, 1));
  ParamStore store(registry, SyncGroup::dense);
  MemoryPlan plan;
  const auto start = std::chrono::steady_clock::now();
  store.plan(plan);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(store.units().size(), static_cast<std::size_t>(kUnits));
  EXPECT_EQ(store.unit_index(UnitId::layer(kUnits - 1)), kUnits - 1);
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace ustrain
