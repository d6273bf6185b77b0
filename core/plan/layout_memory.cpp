#include "core/plan/layout_memory.h"

#include <algorithm>

#include "core/train/rank_memory.h"

namespace ustrain {

LayoutMemory layout_memory(const Recipe& recipe, const Hardware& hw, int ranks_per_node) {
  LayoutMemory m;
  for (int r = 0; r < static_cast<int>(recipe.parallel.pp); ++r) {
    const RankMemory rank = plan_rank_memory(recipe, r);
    m.rank_bytes.push_back(rank.plan.total_bytes());
    const std::size_t held = rank.plan.total_bytes() + (hw.cpu ? rank.plan.host_bytes() : hw.library_bytes);
    m.bytes = std::max(m.bytes, held);
  }
  m.available = hw.cpu ? hw.memory_bytes / static_cast<std::size_t>(std::max(1, ranks_per_node)) : hw.memory_bytes;
  m.fits = m.bytes <= m.available;
  return m;
}

}  // namespace ustrain
