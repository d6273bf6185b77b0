// The vocabulary-shard ops against the whole-vocabulary ops: a table or logits split into P
// shards of equal width (the last padded, its padding filled with values that must not
// matter) give, added up or combined, what the unsharded op gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

struct Split {
  std::int64_t vocab, shards, width;  // width = ceil(vocab / shards): each shard's rows
  VocabShard shard(std::int64_t s) const {
    const std::int64_t begin = s * width;
    return {begin, std::clamp<std::int64_t>(vocab - begin, 0, width)};
  }
};

class VocabShards : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(VocabShards, EmbeddingShardsAddUpToTheLookup) {
  CpuBackend cpu(2);
  const Split split{13, GetParam(), (13 + GetParam() - 1) / GetParam()};
  const std::int64_t n = 29, dim = 5;
  std::vector<float> table = test::random_floats(static_cast<std::size_t>(13 * dim), 1);
  std::vector<std::int32_t> ids = test::random_ids(static_cast<std::size_t>(n), 13, 2);
  std::vector<float> whole(static_cast<std::size_t>(n * dim)), dout = test::random_floats(whole.size(), 3);
  cpu.embedding_forward(test::f32(whole, {n, dim}), test::i32(ids, {n}), test::f32(table, {13, dim}));
  std::vector<float> dtable(table.size(), 0.0f);
  cpu.embedding_backward(test::f32(dtable, {13, dim}), test::i32(ids, {n}), test::f32(dout, {n, dim}));

  std::vector<float> sum(whole.size(), 0.0f);
  for (std::int64_t s = 0; s < split.shards; ++s) {
    const VocabShard shard = split.shard(s);
    // The shard's rows, then padding rows of garbage that no id may reach.
    std::vector<float> rows(static_cast<std::size_t>(split.width * dim), 1e3f);
    std::copy_n(table.begin() + shard.begin * dim, shard.valid * dim, rows.begin());
    std::vector<float> part(whole.size());
    cpu.embedding_forward_shard(test::f32(part, {n, dim}), test::i32(ids, {n}), test::f32(rows, {split.width, dim}),
                                shard);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    std::vector<float> drows(rows.size(), 0.0f);
    cpu.embedding_backward_shard(test::f32(drows, {split.width, dim}), test::i32(ids, {n}), test::f32(dout, {n, dim}),
                                 shard);
    for (std::int64_t i = 0; i < split.width * dim; ++i)
      EXPECT_EQ(drows[static_cast<std::size_t>(i)],
                i < shard.valid * dim ? dtable[static_cast<std::size_t>(shard.begin * dim + i)] : 0.0f)
          << "shard " << s << " element " << i;
  }
  EXPECT_EQ(sum, whole);  // exactly: every row comes from one shard, the others add zeros
}

TEST_P(VocabShards, CrossEntropyShardsCombineToTheWholeLoss) {
  CpuBackend cpu(2);
  const std::int64_t vocab = 13, n = 17;
  const Split split{vocab, GetParam(), (vocab + GetParam() - 1) / GetParam()};
  std::vector<float> logits = test::random_floats(static_cast<std::size_t>(n * vocab), 4, -3.0f, 3.0f);
  std::vector<std::int32_t> targets = test::random_ids(static_cast<std::size_t>(n), static_cast<std::int32_t>(vocab), 5);
  targets[3] = -1;  // an ignored row
  std::vector<float> losses(static_cast<std::size_t>(n)), lse(losses.size()), dlogits(logits.size());
  cpu.cross_entropy_forward(test::f32(losses, {n}), test::f32(lse, {n}), test::f32(logits, {n, vocab}),
                            test::i32(targets, {n}));
  cpu.cross_entropy_backward(test::f32(dlogits, {n, vocab}), test::f32(logits, {n, vocab}), test::f32(lse, {n}),
                             test::i32(targets, {n}), 0.25f);

  // Each shard's columns, padded with large logits that must be masked out.
  std::vector<std::vector<float>> shard_logits;
  std::vector<float> parts(static_cast<std::size_t>(split.shards * 2 * n));
  for (std::int64_t s = 0; s < split.shards; ++s) {
    const VocabShard shard = split.shard(s);
    std::vector<float> cols(static_cast<std::size_t>(n * split.width), 50.0f);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < shard.valid; ++c)
        cols[static_cast<std::size_t>(r * split.width + c)] = logits[static_cast<std::size_t>(r * vocab + shard.begin + c)];
    Tensor stats(parts.data() + s * 2 * n, Shape{2, n});
    cpu.cross_entropy_shard_stats(stats, test::f32(cols, {n, split.width}), test::i32(targets, {n}), shard);
    shard_logits.push_back(std::move(cols));
  }
  std::vector<float> got_losses(losses.size()), got_lse(lse.size());
  cpu.cross_entropy_combine(test::f32(got_losses, {n}), test::f32(got_lse, {n}),
                            test::f32(parts, {split.shards, 2, n}), test::i32(targets, {n}));
  EXPECT_LT(test::rel_error(got_losses, test::to_double(losses)), 1e-6);
  EXPECT_LT(test::rel_error(got_lse, test::to_double(lse)), 1e-6);
  EXPECT_EQ(got_losses[3], 0.0f);

  for (std::int64_t s = 0; s < split.shards; ++s) {
    const VocabShard shard = split.shard(s);
    std::vector<float>& cols = shard_logits[static_cast<std::size_t>(s)];
    cpu.cross_entropy_backward_shard(test::f32(cols, {n, split.width}), test::f32(cols, {n, split.width}),
                                     test::f32(got_lse, {n}), test::i32(targets, {n}), 0.25f, shard);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < split.width; ++c) {
        const float got = cols[static_cast<std::size_t>(r * split.width + c)];
        if (c >= shard.valid || targets[static_cast<std::size_t>(r)] < 0) {
          EXPECT_EQ(got, 0.0f) << "padding or ignored row " << r << ", column " << c;
          continue;
        }
        EXPECT_NEAR(got, dlogits[static_cast<std::size_t>(r * vocab + shard.begin + c)], 1e-6)
            << "shard " << s << " row " << r << " column " << c;
      }
  }
}

// 1: the whole vocabulary as one shard; 2, 4: padded (13 rows); 13: one row per shard; 16:
// shards with no real row at all.
INSTANTIATE_TEST_SUITE_P(Shards, VocabShards, ::testing::Values(1, 2, 3, 4, 13, 16));

}  // namespace
}  // namespace ustrain
