#include "parallel/context_split.h"

#include <string>

#include "kernels/error.h"

namespace ustrain {

std::array<SeqRange, 2> ContextSplit::runs(std::int64_t seq_len) const {
  if (size == 1) return {SeqRange{0, seq_len}, SeqRange{seq_len, 0}};
  USTRAIN_ASSERT(seq_len % (2 * size) == 0, "a sequence of " + std::to_string(seq_len) + " tokens does not split into " +
                                                std::to_string(2 * size) + " chunks");
  const std::int64_t chunk = seq_len / (2 * size);
  return {SeqRange{rank * chunk, chunk}, SeqRange{(2 * size - 1 - rank) * chunk, chunk}};
}

}  // namespace ustrain
