// The vocabulary split as tensor parallelism splits it (core/recipe/geometry.cpp), for the
// tests of the vocabulary-parallel ops: P shards of ceil(V / P) rows of a table (columns of
// logits) each; shard s holds the ids [s * width, s * width + valid) in its first `valid`
// rows and pads the rest, so the last shards may be short, or empty when P does not divide
// V finely enough.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ustrain::gpu_test {

struct VocabSplit {
  std::int64_t vocab = 0;
  std::int64_t width = 0;  // rows (columns) every shard holds, padding included
  std::vector<VocabShard> shards;
};

inline VocabSplit split_vocab(std::int64_t vocab, int parts) {
  VocabSplit split{vocab, (vocab + parts - 1) / parts, {}};
  for (int s = 0; s < parts; ++s) {
    const std::int64_t begin = split.width * s;
    split.shards.push_back({begin, std::clamp<std::int64_t>(vocab - begin, 0, split.width)});
  }
  return split;
}

// The ids on both sides of every shard's edges (begin - 1, begin, begin + valid - 1,
// begin + valid) that lie in the vocabulary, once each: where an off-by-one would show.
inline std::vector<std::int32_t> shard_edge_ids(const VocabSplit& split) {
  std::set<std::int32_t> ids;
  for (const VocabShard& s : split.shards)
    for (std::int64_t id : {s.begin - 1, s.begin, s.begin + s.valid - 1, s.begin + s.valid})
      if (id >= 0 && id < split.vocab) ids.insert(static_cast<std::int32_t>(id));
  return {ids.begin(), ids.end()};
}

inline std::string describe(const VocabSplit& split, std::size_t s) {
  const VocabShard& shard = split.shards[s];
  return "V=" + std::to_string(split.vocab) + " shard " + std::to_string(s) + "/" +
         std::to_string(split.shards.size()) + " [" + std::to_string(shard.begin) + ", +" +
         std::to_string(shard.valid) + ") of width " + std::to_string(split.width);
}

}  // namespace ustrain::gpu_test
