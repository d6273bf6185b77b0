// How context parallelism splits every sequence: cut into 2C chunks, rank i of C holds
// chunks i and 2C - 1 - i, one after the other (zig-zag), so that under the causal mask every
// rank has the same attention work (parallel/ring_attention.h). The data loader, the RoPE
// tables and the ring all read the split here.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/backend.h"

namespace ustrain {

// The zig-zag split of every sequence over `size` ranks, as seen by rank `rank`.
struct ContextSplit {
  int size = 1, rank = 0;
  // Global positions of this rank's two runs of a sequence of seq_len tokens (seq_len
  // divisible by 2 size); held one after the other, so local row r is position runs[0].begin
  // + r for r < chunk, else runs[1].begin + r - chunk. At size 1 the first run is the whole
  // sequence and the second is empty.
  std::array<SeqRange, 2> runs(std::int64_t seq_len) const;
};

}  // namespace ustrain
