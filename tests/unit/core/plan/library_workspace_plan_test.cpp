// The backend's library workspace is part of the memory plan: none on the CPU (whose plan is
// unchanged), cuBLASLt's fixed workspace on CUDA, listed as its own category, counted in the
// total the memory checks use, and handed to the backend while the plan is allocated.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/memory/memory_plan.h"
#include "core/recipe/recipe.h"
#include "core/plan/rank_memory.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/library_workspace.h"

namespace ustrain {
namespace {

Recipe quickstart_on(const std::string& device) {
  Recipe r = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/quickstart.toml", {});
  r.device.type = device;
  r.parallel.dp = 1;  // as one process resolves it
  return r;
}

TEST(LibraryWorkspacePlan, TheCpuNeedsNoneAndCudaCuBlasLtsWorkspace) {
  EXPECT_EQ(library_workspace_bytes(Device::cpu), 0u);
  EXPECT_EQ(library_workspace_bytes(Device::cuda), std::size_t{32} << 20);
  MemoryPlan cpu;
  plan_library_workspace(Device::cpu, cpu);
  EXPECT_TRUE(cpu.entries().empty());
  EXPECT_EQ(cpu.total_bytes(), 0u);
  MemoryPlan cuda;
  plan_library_workspace(Device::cuda, cuda);
  EXPECT_EQ(cuda.bytes(MemCategory::library_workspace), library_workspace_bytes(Device::cuda));
  EXPECT_EQ(cuda.total_bytes(), library_workspace_bytes(Device::cuda));
}

TEST(LibraryWorkspacePlan, ACudaRanksPlanIsTheCpuPlanPlusTheLibraryWorkspaceAndOpScratch) {
  const MemoryPlan cpu = plan_rank_memory(quickstart_on("cpu"), 0).plan;
  const MemoryPlan cuda = plan_rank_memory(quickstart_on("cuda"), 0).plan;
  for (int c = 0; c < kMemCategories; ++c) {
    const auto category = static_cast<MemCategory>(c);
    if (category != MemCategory::library_workspace && category != MemCategory::op_scratch) {
      EXPECT_EQ(cuda.bytes(category), cpu.bytes(category)) << mem_category_name(category);
    }
  }
  EXPECT_EQ(cpu.bytes(MemCategory::library_workspace), 0u);
  EXPECT_EQ(cuda.bytes(MemCategory::library_workspace), library_workspace_bytes(Device::cuda));
  EXPECT_EQ(cuda.total_bytes(),
            cpu.total_bytes() + library_workspace_bytes(Device::cuda) + cuda.bytes(MemCategory::op_scratch));
  // The summary lists the category only where there is one.
  EXPECT_EQ(cpu.summary().find("library workspace"), std::string::npos);
  EXPECT_NE(cuda.summary().find("library workspace    32.00 MiB"), std::string::npos) << cuda.summary();
}

// A CPU backend that records the library workspace it is handed.
class RecordingWorkspaceBackend : public CpuBackend {
 public:
  RecordingWorkspaceBackend() : CpuBackend(1) {}
  void use_library_workspace(void* workspace, std::size_t bytes) override { calls.emplace_back(workspace, bytes); }
  std::vector<std::pair<void*, std::size_t>> calls;
};

TEST(LibraryWorkspacePlan, PlannedMemoryHandsTheWorkspaceToTheBackendAndTakesItBack) {
  MemoryPlan plan;
  plan.add("x", MemCategory::parameters, Shape{4});
  plan_library_workspace(Device::cuda, plan);
  RecordingWorkspaceBackend backend;
  {
    PlannedMemory memory(plan, backend);
    ASSERT_EQ(backend.calls.size(), 1u);
    EXPECT_EQ(backend.calls[0].first, memory.category(MemCategory::library_workspace).data);
    EXPECT_EQ(backend.calls[0].second, library_workspace_bytes(Device::cuda));
  }
  ASSERT_EQ(backend.calls.size(), 2u);
  EXPECT_EQ(backend.calls[1].first, nullptr);

  MemoryPlan without;  // a CPU plan hands nothing over
  without.add("x", MemCategory::parameters, Shape{4});
  RecordingWorkspaceBackend cpu;
  { PlannedMemory memory(without, cpu); }
  EXPECT_TRUE(cpu.calls.empty());
}

}  // namespace
}  // namespace ustrain
