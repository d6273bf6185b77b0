// A layout's memory per device: the trainer's own plan of each pipeline rank
// (core/plan/rank_memory.h, what `--dry-run` prints), its maximum over the ranks, plus the GPU
// libraries' workspaces; on the CPU, where the ranks of a node share the host, also the host
// buffers beside the arenas (the checkpoint snapshot), as `ustrain train` checks them.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/distributed/pipeline_plan.h"
#include "core/plan/hardware.h"
#include "core/plan/once_map.h"
#include "core/recipe/recipe.h"

namespace ustrain {

struct LayoutMemory {
  std::vector<std::size_t> rank_bytes;  // per pipeline rank: the plan's arenas (--dry-run's "total")
  std::size_t bytes = 0;                // per device: the largest rank's, with what is counted beside it
  std::size_t available = 0;            // per device (on the CPU the host's share of one rank)
  bool fits = false;
  double fraction() const { return available > 0 ? static_cast<double>(bytes) / static_cast<double>(available) : 0; }
};

// A layout's pipeline programs (training and validation) with their equal-cost simulations,
// and each pipeline rank's slots: what every layout of the same schedule, pp, virtual stages
// and micro-batch counts shares.
struct LayoutPrograms {
  PipelinePrograms programs;
  std::vector<SlotPlan> slots;  // per pipeline rank
};

// Plans layouts' memory, each schedule replayed once for all the layouts that share it, and
// each rank's plan made once for all the layouts and ranks that share what decides it (the
// rank's layers, the layout's sharding, micro-batch, recompute policy and the schedule's
// slots); its op scratch, a line of its own, is added to the plan made without it.
class LayoutMemoryPlanner {
 public:
  // `ranks_per_node`: the ranks that share one host's memory on the CPU.
  LayoutMemoryPlanner(Hardware hw, int ranks_per_node) : hw_(std::move(hw)), ranks_per_node_(ranks_per_node) {}
  // `op_scratch(r)`: pipeline rank r's op scratch (deviceless_op_scratch). Safe to call from
  // several threads at once.
  LayoutMemory of(const Recipe& recipe, const std::function<std::size_t(int pp_rank)>& op_scratch);
  // With the scratch recorded here, rank by rank.
  LayoutMemory of(const Recipe& recipe);
  // A lower bound of of(recipe) that records nothing: the same plan without the op scratch
  // (parameters, gradients, optimizer state, activations and buffers are planned from shapes
  // alone; the scratch needs the step's ops). A layout whose bound does not fit never fits.
  LayoutMemory bound(const Recipe& recipe);
  // The recipe's programs, made once per schedule, pp, virtual stages and micro-batch counts.
  const LayoutPrograms& programs(const Recipe& recipe);

 private:
  // A rank's plan without its op scratch.
  struct RankPlan {
    std::size_t arenas = 0, host = 0;
    std::size_t scratch_line = 0;  // the op scratch line it holds anyway (FP8's quantised operands)
  };
  // The plan of each rank with the scratch `op_scratch` gives it (nullptr: none).
  LayoutMemory planned(const Recipe& recipe, const std::function<std::size_t(int pp_rank)>* op_scratch);

  Hardware hw_;
  int ranks_per_node_;
  OnceMap<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>, LayoutPrograms> programs_;
  OnceMap<std::string, RankPlan> plans_;
};

}  // namespace ustrain
