// `ustrain plan`'s memory per pipeline rank against the trainer's: for 20 random layouts of the
// quickstart and the 1B recipe, the planner's bytes of every pipeline rank equal the plan the
// training step of that rank makes (TrainingRank over counting groups on the recording
// backend, which reserves at least as much) and the totals `ustrain train --dry-run` prints.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/distributed/process_layout.h"
#include "core/plan/layout_memory.h"
#include "core/plan/layout_space.h"
#include "core/plan/step_scratch.h"
#include "core/recipe/recipe.h"
#include "core/step/training_step.h"
#include "kernels/record/recording_backend.h"
#include "parallel/counting_world.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  EXPECT_EQ(pclose(pipe), 0) << command << "\n" << out;
  return out;
}

// The totals of the memory plans `--dry-run` prints, one per pipeline rank, in rank order.
std::vector<std::string> dry_run_totals(const std::string& output) {
  std::vector<std::string> totals;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("  total ", 0) == 0 && line.find("with host") == std::string::npos)
      totals.push_back(line.substr(line.find_first_not_of(' ', 8)));
  return totals;
}

// The arenas the trainer plans for pipeline rank `r` (tensor-, data-parallel rank 0).
std::size_t trainer_plan_bytes(const Recipe& recipe, int r) {
  const MeshShape shape = mesh_shape_of(recipe);
  const Mesh mesh(shape, r * shape.dp * shape.cp * shape.tp, shape.world_size());
  const Device device = recipe.device.type == "cuda" ? Device::cuda : Device::cpu;
  const auto groups = counting_process_groups(mesh, device);
  auto backend = std::make_unique<RecordingBackend>(device);
  RecordingBackend& recorder = *backend;
  // The op scratch as RunSetup plans it, worked out without the device (on a GPU the run adds
  // cuDNN's plan workspace, which --dry-run and the planner cannot know).
  TrainingRank rank(recipe, *groups, std::move(backend), kGradientBucketBytes, MemoryShare{}, false,
                    deviceless_op_scratch(recipe, r));
  EXPECT_GE(recorder.reserved_bytes(), rank.instance.plan.total_bytes());
  return rank.instance.plan.total_bytes();
}

// A .npy of random uint16 token ids (what scripts/gpu-check.sh converts for the 1B recipe).
void write_npy(const fs::path& path, int rows, int cols, int vocab) {
  std::string header = fmt::format("{{'descr': '<u2', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const auto length = static_cast<std::uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&length), 2);
  f << header;
  std::mt19937 rng(7);
  for (int i = 0; i < rows * cols; ++i) {
    const auto id = static_cast<std::uint16_t>(rng() % static_cast<unsigned>(vocab));
    f.write(reinterpret_cast<const char*>(&id), 2);
  }
}

struct Case {
  std::string recipe;
  std::vector<std::string> sets;  // the dataset and device
  std::vector<int> devices;
};

void check_random_layouts(const Case& c, int count, std::mt19937& rng) {
  const std::string path = std::string(USTRAIN_SOURCE_DIR) + "/recipes/" + c.recipe;
  const Recipe base = load_recipe(path, c.sets);
  const Hardware gpu = gpu_hardware("h100");
  for (int i = 0; i < count; ++i) {
    const int devices = c.devices[rng() % c.devices.size()];
    const std::vector<Candidate> all =
        enumerate_layouts(base, SearchSpace{devices, 8, base.train.global_batch, false}).candidates;
    ASSERT_FALSE(all.empty());
    const Candidate& pick = all[rng() % all.size()];
    SCOPED_TRACE(fmt::format("{} on {} devices: {}", c.recipe, devices, fmt::join(pick.layout.overrides(), " ")));
    LayoutMemoryPlanner planner(gpu, 8);
    const LayoutMemory planned = planner.of(pick.recipe());
    ASSERT_EQ(planned.rank_bytes.size(), static_cast<std::size_t>(pick.layout.pp));
    std::string command = fmt::format("{} train {} --dry-run", USTRAIN_BINARY, path);
    for (const std::string& s : c.sets) command += " --set " + s;
    for (const std::string& s : pick.layout.overrides()) command += " --set " + s;
    const std::vector<std::string> printed = dry_run_totals(run(command));
    ASSERT_EQ(printed.size(), planned.rank_bytes.size());
    std::cout << fmt::format("{} on {} devices, {}: per pipeline rank {}\n", c.recipe, devices,
                             fmt::join(pick.layout.overrides(), " "), fmt::join(planned.rank_bytes, ", "));
    for (int r = 0; r < static_cast<int>(pick.layout.pp); ++r) {
      const std::size_t bytes = planned.rank_bytes[static_cast<std::size_t>(r)];
      EXPECT_EQ(bytes, trainer_plan_bytes(pick.recipe(), r)) << "pipeline rank " << r;
      EXPECT_EQ(format_bytes(bytes), printed[static_cast<std::size_t>(r)]) << "pipeline rank " << r;
    }
  }
}

TEST(PlanMemory, RandomLayoutsMatchTheTrainerAndDryRun) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ustrain-plan-memory-{}", getpid());
  fs::create_directories(dir / "corpus");
  {
    std::ofstream text(dir / "corpus" / "a.txt");
    for (int i = 0; i < 400; ++i) text << fmt::format("document {} says the quick brown fox jumps over {} dogs\n\n", i, i % 13);
  }
  run(fmt::format("{} data convert --input {} --output {} --val-fraction 0.1", USTRAIN_BINARY,
                  (dir / "corpus").string(), (dir / "bytes").string()));
  write_npy(dir / "tokens.npy", 8, 4096, 32000);
  run(fmt::format("{} data convert --input {} --output {} --format npy --tokenizer random --vocab-size 32000 --no-eos "
                  "--val-fraction 0",
                  USTRAIN_BINARY, (dir / "tokens.npy").string(), (dir / "random").string()));
  std::mt19937 rng(2026);
  check_random_layouts({"quickstart.toml", {"data.path=" + (dir / "bytes").string()}, {1, 2, 4, 8}}, 10, rng);
  check_random_layouts({"bench-1b.toml", {"data.path=" + (dir / "random").string()}, {2, 4, 8, 16}}, 10, rng);
  fs::remove_all(dir);
}

// The bound that prunes layouts before their step is recorded never exceeds their plan, rank
// by rank, and falls short of it exactly by the op scratch where a rank takes any.
TEST(PlanMemory, BoundIsThePlanWithoutTheOpScratch) {
  const Recipe base = load_recipe(std::string(USTRAIN_SOURCE_DIR) + "/recipes/quickstart.toml",
                                  {"device.type=cuda", "train.precision=bf16"});
  LayoutMemoryPlanner planner(gpu_hardware("h100"), 8);
  int below = 0;
  for (const Candidate& c : enumerate_layouts(base, SearchSpace{4, 8, base.train.global_batch, false}).candidates) {
    SCOPED_TRACE(c.layout.str());
    const LayoutMemory planned = planner.of(c.recipe());
    const LayoutMemory bound = planner.bound(c.recipe());
    ASSERT_EQ(bound.rank_bytes.size(), planned.rank_bytes.size());
    for (std::size_t r = 0; r < planned.rank_bytes.size(); ++r) {
      EXPECT_LE(bound.rank_bytes[r], planned.rank_bytes[r]) << "pipeline rank " << r;
      const bool scratch = deviceless_op_scratch(c.recipe(), static_cast<int>(r)) > 0;
      EXPECT_EQ(bound.rank_bytes[r] < planned.rank_bytes[r], scratch) << "pipeline rank " << r;
      below += bound.rank_bytes[r] < planned.rank_bytes[r] ? 1 : 0;
    }
  }
  EXPECT_GT(below, 0);  // some rank takes op scratch: the bound is not trivially the plan
}

}  // namespace
}  // namespace ustrain
