// The vocabulary-parallel embedding of the CUDA backend against the CPU reference: every
// tensor-parallel shard of the table (gpu_vocab_shards.h) looks up only the ids in its shard
// (zero rows for the others) and accumulates only their gradients, never touching its
// padding rows. Tolerances: gpu_test_support.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "gpu_vocab_shards.h"

namespace ustrain::gpu_test {
namespace {

class GpuVocabEmbeddingTest : public GpuActTest {};

struct ShardedEmbeddingCase {
  std::int64_t vocab, dim, ids;
  int shards;
};
// Padding in the last shard (37 = 3 * 10 + 7); three long shards of an odd width; an empty
// last shard (5 ids over 4 shards of 2: valid 2, 2, 1, 0) with a wide row.
const ShardedEmbeddingCase kCases[] = {{37, 48, 300, 4}, {1000, 19, 64, 3}, {5, 2048, 512, 4}};

// Random ids over the whole vocabulary, so most belong to other shards, with the ids at every
// shard edge and one id repeated back to back.
std::vector<std::int32_t> sharded_ids(const ShardedEmbeddingCase& c, const VocabSplit& split, std::uint32_t seed) {
  auto ids = random_ids(static_cast<std::size_t>(c.ids), static_cast<std::int32_t>(c.vocab), seed);
  const auto edges = shard_edge_ids(split);
  for (std::size_t i = 0; i < edges.size(); ++i) ids[3 + i] = edges[i];
  ids[0] = ids[1] = ids[2] = edges.back();
  return ids;
}

TEST_P(GpuVocabEmbeddingTest, ShardForwardGathersOwnRowsAndZerosTheRest) {
  for (const auto& c : kCases) {
    const VocabSplit split = split_vocab(c.vocab, c.shards);
    const Shape ts{split.width, c.dim}, os{c.ids, c.dim};
    auto ids = sharded_ids(c, split, 50);
    auto dids = ids_on_device(gpu(), ids);
    for (std::size_t s = 0; s < split.shards.size(); ++s) {
      // Padding rows hold values too: a lookup that reads them shows.
      auto table = random_values(static_cast<std::size_t>(ts.numel()), 51 + static_cast<std::uint32_t>(s), act());
      std::vector<float> want(static_cast<std::size_t>(os.numel()));
      cpu().embedding_forward_shard(host(want, os), host_ids(ids, {c.ids}), host(table, ts), split.shards[s]);
      auto dtable = on_device(gpu(), table, ts, act());
      DeviceTensor out(gpu(), os, act());
      gpu().fill(out, 7.0f);  // overwritten everywhere, the zero rows included
      gpu().embedding_forward_shard(out, *dids, *dtable, split.shards[s]);
      EXPECT_TRUE(same_bits(out.download(), want))
          << "a shard's gather copies its rows exactly and zeros the others; " << describe(split, s)
          << " D=" << c.dim;
    }
  }
}

TEST_P(GpuVocabEmbeddingTest, ShardBackwardAccumulatesOwnIdsIntoFp32Table) {
  for (const auto& c : kCases) {
    const VocabSplit split = split_vocab(c.vocab, c.shards);
    const Shape ts{split.width, c.dim}, os{c.ids, c.dim};
    auto ids = sharded_ids(c, split, 52);
    auto dout = random_values(static_cast<std::size_t>(os.numel()), 53, act());
    auto dids = ids_on_device(gpu(), ids);
    auto ddout = on_device(gpu(), dout, os, act());
    const std::set<std::int32_t> used(ids.begin(), ids.end());
    for (std::size_t s = 0; s < split.shards.size(); ++s) {
      const VocabShard shard = split.shards[s];
      const auto prefill = random_values(static_cast<std::size_t>(ts.numel()), 54 + static_cast<std::uint32_t>(s),
                                         DType::f32);
      auto want = prefill;
      cpu().embedding_backward_shard(host(want, ts), host_ids(ids, {c.ids}), host(dout, os), shard);
      auto dtable = on_device(gpu(), prefill, ts, DType::f32);
      gpu().embedding_backward_shard(*dtable, *dids, *ddout, shard);
      const auto got = dtable->download();
      const std::string what = "embedding shard dtable " + describe(split, s) + " D=" + std::to_string(c.dim);
      expect_close(got, want, fp32_tolerance(Measure::norm_rel), what);
      // Rows no id of the shard points at, and the padding rows, keep their gradient bit for bit.
      for (std::int64_t r = 0; r < split.width; ++r) {
        if (r < shard.valid && used.count(static_cast<std::int32_t>(shard.begin + r))) continue;
        const auto row = static_cast<std::size_t>(r * c.dim);
        EXPECT_EQ(std::memcmp(got.data() + row, prefill.data() + row, static_cast<std::size_t>(c.dim) * 4), 0)
            << what << ": row " << r << (r < shard.valid ? " (no id of its own)" : " (padding)") << " changed";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuVocabEmbeddingTest, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
