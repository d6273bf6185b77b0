#include "core/plan/layout_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/plan/step_scratch.h"
#include "core/plan/rank_memory.h"

namespace ustrain {

LayoutMemory LayoutMemoryPlanner::of(const Recipe& recipe) {
  return of(recipe, [&recipe](int pp_rank) { return deviceless_op_scratch(recipe, pp_rank); });
}

LayoutMemory LayoutMemoryPlanner::of(const Recipe& recipe, const std::function<std::size_t(int pp_rank)>& op_scratch) {
  return planned(recipe, &op_scratch);
}

LayoutMemory LayoutMemoryPlanner::bound(const Recipe& recipe) {
  // The op scratch is a line of its own in the plan (plan_op_scratch): without it the plan is
  // smaller or equal.
  return planned(recipe, nullptr);
}

const LayoutPrograms& LayoutMemoryPlanner::programs(const Recipe& recipe) {
  const ParallelSection& p = recipe.parallel;
  const auto key = std::tuple{p.pp_schedule, p.pp, p.virtual_stages, recipe.grad_accum_steps(), recipe.train.eval_batches};
  return programs_.get(key, [&] {
    LayoutPrograms made{plan_pipeline_programs(recipe), {}};
    for (int r = 0; r < static_cast<int>(p.pp); ++r) made.slots.push_back(pipeline_plan_of(recipe, made.programs, r).slots);
    return made;
  });
}

LayoutMemory LayoutMemoryPlanner::planned(const Recipe& recipe,
                                          const std::function<std::size_t(int pp_rank)>* op_scratch) {
  LayoutMemory m;
  const ParallelSection& p = recipe.parallel;
  const LayoutPrograms& programs = this->programs(recipe);
  for (int r = 0; r < static_cast<int>(p.pp); ++r) {
    // Ranks between the first and the last hold alike layers; the slots tell them apart.
    const int kind = r == 0 ? 0 : r == p.pp - 1 ? 2 : 1;
    const SlotPlan& s = programs.slots[static_cast<std::size_t>(r)];
    const std::string key = fmt::format(
        "{} {} {} {} {} {} {} {} {} {} {} {} [{}] [{}] {} {} {} {} {}", p.dp, p.tp, p.pp, p.cp, p.ep, p.zero, p.sp,
        p.virtual_stages, recipe.train.micro_batch, recipe.train.recompute, kind, recipe.grad_accum_steps(),
        fmt::join(s.slots, ","), fmt::join(s.receive_buffers, ","), s.split_backward, s.kept_losses,
        recipe.train.precision, recipe.device.type, p.shard_dp());
    const RankPlan& plan = plans_.get(key, [&] {
      // Of the rank's pipeline plan only its slots shape the memory plan: the programs are not copied.
      const RankMemory rank = plan_rank_memory(recipe, r, PipelinePlan{{}, {}, {}, s}, 0);
      return RankPlan{rank.plan.total_bytes(), rank.plan.host_bytes(), rank.plan.bytes(MemCategory::op_scratch)};
    });
    // The op scratch line holds the larger of the recorded scratch and what the plan holds anyway.
    std::size_t arenas = plan.arenas;
    if (op_scratch) {
      MemoryPlan line;
      plan_op_scratch((*op_scratch)(r), line);
      arenas += std::max(plan.scratch_line, line.bytes(MemCategory::op_scratch)) - plan.scratch_line;
    }
    m.rank_bytes.push_back(arenas);
    m.bytes = std::max(m.bytes, arenas + (hw_.cpu ? plan.host : hw_.library_bytes));
  }
  m.available = hw_.cpu ? hw_.memory_bytes / static_cast<std::size_t>(std::max(1, ranks_per_node_)) : hw_.memory_bytes;
  m.fits = m.bytes <= m.available;
  return m;
}

}  // namespace ustrain
