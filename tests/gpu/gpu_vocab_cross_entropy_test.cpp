// The vocabulary-parallel cross-entropy of the CUDA backend against the CPU reference: each
// tensor-parallel shard of the logits columns (gpu_vocab_shards.h) computes its statistics,
// the gathered statistics combine into the losses and the global lse, and each shard's
// backward uses that lse; padding columns take no part. Tolerances: gpu_test_support.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "gpu_vocab_shards.h"

namespace ustrain::gpu_test {
namespace {

class GpuVocabCrossEntropyTest : public GpuActTest {};

struct ShardedCrossEntropyCase {
  std::int64_t rows, vocab;
  int shards;
};
// Shards of 254 columns, the last with 3 padding columns (no 16-byte rows in any dtype);
// shards of 8000 columns, 16-byte rows in every dtype, the last with 3 padding columns; an
// empty last shard (5 ids over 4 shards of 2: valid 2, 2, 1, 0).
const ShardedCrossEntropyCase kCases[] = {{61, 1013, 4}, {16, 31997, 4}, {3, 5, 4}};

// A padding column's logit: far above the others, so a kernel that counts it is far off.
constexpr float kPaddingLogit = 50.0f;

// Targets over the whole vocabulary with every fourth row ignored (-1), the first and last
// ids present and, as far as the rows go, the ids at every shard edge.
std::vector<std::int32_t> sharded_targets(const ShardedCrossEntropyCase& c, const VocabSplit& split) {
  auto t = random_ids(static_cast<std::size_t>(c.rows), static_cast<std::int32_t>(c.vocab), 60);
  t[0] = 0;
  if (t.size() > 2) t[2] = static_cast<std::int32_t>(c.vocab - 1);
  std::size_t next = 3;
  for (std::int32_t id : shard_edge_ids(split)) {
    if (next % 4 == 1) ++next;  // rows 1, 5, 9, ... stay ignored
    if (next >= t.size()) break;
    t[next++] = id;
  }
  for (std::size_t i = 1; i < t.size(); i += 4) t[i] = -1;
  return t;
}

// Columns [begin, begin + valid) of logits (N, V), then padding: (N, width).
std::vector<float> shard_columns(const std::vector<float>& logits, std::int64_t rows, const VocabSplit& split,
                                 VocabShard shard, DType act) {
  std::vector<float> out(static_cast<std::size_t>(rows * split.width), round_to(act, kPaddingLogit));
  for (std::int64_t n = 0; n < rows; ++n)
    for (std::int64_t v = 0; v < shard.valid; ++v)
      out[static_cast<std::size_t>(n * split.width + v)] = logits[static_cast<std::size_t>(n * split.vocab + shard.begin + v)];
  return out;
}

// Row r of a (R, N) fp32 tensor.
std::vector<float> row_of(const std::vector<float>& t, std::int64_t r, std::int64_t n) {
  return {t.begin() + r * n, t.begin() + (r + 1) * n};
}

// The values at rows whose target is counted (>= 0).
std::vector<float> counted(const std::vector<float>& v, const std::vector<std::int32_t>& targets) {
  std::vector<float> out;
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (targets[i] >= 0) out.push_back(v[i]);
  return out;
}

// Shard s's statistics (lse, target logit) within all shards' (P, 2, N) against the CPU's.
void expect_shard_stats_match(const std::vector<float>& all_parts, const std::vector<float>& cpu_parts, std::int64_t s,
                              std::int64_t rows, const std::vector<std::int32_t>& targets, VocabShard shard,
                              const std::string& what) {
  const std::vector<float> got_stats(all_parts.begin() + s * 2 * rows, all_parts.begin() + (s + 1) * 2 * rows);
  const std::vector<float> want_stats(cpu_parts.begin() + s * 2 * rows, cpu_parts.begin() + (s + 1) * 2 * rows);
  const auto got_lse = row_of(got_stats, 0, rows), want_lse = row_of(want_stats, 0, rows);
  const auto got_logit = row_of(got_stats, 1, rows), want_logit = row_of(want_stats, 1, rows);
  for (std::int64_t n = 0; n < rows; ++n) {
    const auto i = static_cast<std::size_t>(n);
    // The target's logit is a copy (or 0 where the target lies elsewhere or is ignored).
    EXPECT_EQ(got_logit[i], want_logit[i]) << "shard stats target logit, row " << n << " " << what;
    if (targets[i] < 0) {
      EXPECT_EQ(got_lse[i], 0.0f) << "shard stats lse, ignored row " << n << " " << what;
    } else if (shard.valid == 0) {
      EXPECT_EQ(got_lse[i], -INFINITY) << "shard stats lse of an empty shard, row " << n << " " << what;
    }
  }
  // lse sums exponentials of the same act inputs in fp32: no act rounding inside.
  if (shard.valid > 0)
    expect_close(counted(got_lse, targets), counted(want_lse, targets), fp32_tolerance(Measure::max_rel),
                 "shard stats lse " + what);
}

TEST_P(GpuVocabCrossEntropyTest, ShardStatsCombineAndShardBackwardMatchCpu) {
  for (const auto& c : kCases) {
    const VocabSplit split = split_vocab(c.vocab, c.shards);
    const auto parts = static_cast<std::int64_t>(split.shards.size());
    const std::int64_t rows = c.rows;
    const Shape ss{rows, split.width}, ws{rows, c.vocab}, rs{rows}, stats_shape{2, rows};
    const std::string at = " N=" + std::to_string(rows) + " V=" + std::to_string(c.vocab) + " over " +
                           std::to_string(parts) + " shards";
    auto logits = random_values(static_cast<std::size_t>(ws.numel()), 61, act(), -4.0f, 4.0f);  // (N, V)
    auto targets = sharded_targets(c, split);
    const auto gtargets = ids_on_device(gpu(), targets);
    const auto counted_rows = std::count_if(targets.begin(), targets.end(), [](std::int32_t t) { return t >= 0; });
    const float dloss = 1.0f / static_cast<float>(counted_rows);  // the mean over counted tokens

    // ---- each shard's statistics, gathered into parts (P, 2, N) ----
    std::vector<std::vector<float>> shard_logits;
    std::vector<float> cpu_parts(static_cast<std::size_t>(parts * 2 * rows));
    DeviceTensor gpu_parts(gpu(), {parts, 2, rows}, DType::f32);
    std::vector<std::unique_ptr<DeviceTensor>> gshard_logits;
    for (std::int64_t s = 0; s < parts; ++s) {
      const VocabShard shard = split.shards[static_cast<std::size_t>(s)];
      const std::string what = describe(split, static_cast<std::size_t>(s)) + at;
      shard_logits.push_back(shard_columns(logits, rows, split, shard, act()));
      auto& z = shard_logits.back();
      Tensor want(cpu_parts.data() + s * 2 * rows, stats_shape);
      cpu().cross_entropy_shard_stats(want, host(z, ss), host_ids(targets, rs), shard);
      gshard_logits.push_back(on_device(gpu(), z, ss, act()));
      const Tensor got = gpu_parts.tensor().slice(s, s + 1).view(stats_shape);
      gpu().cross_entropy_shard_stats(got, *gshard_logits.back(), *gtargets, shard);

      expect_shard_stats_match(gpu_parts.download(), cpu_parts, s, rows, targets, shard, what);
    }

    // ---- the combination: losses and the global lse ----
    std::vector<float> losses(static_cast<std::size_t>(rows)), lse(losses.size());
    const Shape ps{parts, 2, rows};
    cpu().cross_entropy_combine(host(losses, rs), host(lse, rs), host(cpu_parts, ps), host_ids(targets, rs));
    DeviceTensor glosses(gpu(), rs, DType::f32), glse(gpu(), rs, DType::f32);
    gpu().cross_entropy_combine(glosses, glse, gpu_parts, *gtargets);
    const auto got_losses = glosses.download(), got_lse = glse.download();
    expect_close(got_losses, losses, fp32_tolerance(Measure::max_rel), "combined losses" + at);
    expect_close(got_lse, lse, fp32_tolerance(Measure::max_rel), "combined lse" + at);
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (targets[i] < 0) {
        EXPECT_EQ(got_losses[i], 0.0f) << "combined loss, ignored row " << i << at;
        EXPECT_EQ(got_lse[i], 0.0f) << "combined lse, ignored row " << i << at;
      }
    // The shards together give the loss of whole rows: each shard's lse is rounded to fp32
    // once and the combination is in double, so they agree to the fp32 bound.
    std::vector<float> whole_losses(losses.size()), whole_lse(losses.size());
    cpu().cross_entropy_forward(host(whole_losses, rs), host(whole_lse, rs), host(logits, ws), host_ids(targets, rs));
    expect_close(got_losses, whole_losses, fp32_tolerance(Measure::max_rel), "combined losses vs whole rows" + at);

    // ---- each shard's backward with the global lse ----
    for (std::int64_t s = 0; s < parts; ++s) {
      const VocabShard shard = split.shards[static_cast<std::size_t>(s)];
      const std::string what = describe(split, static_cast<std::size_t>(s)) + at;
      auto& z = shard_logits[static_cast<std::size_t>(s)];
      std::vector<float> want(z.size());
      cpu().cross_entropy_backward_shard(host(want, ss), host(z, ss), host(lse, rs), host_ids(targets, rs), dloss,
                                         shard);
      auto& gz = *gshard_logits[static_cast<std::size_t>(s)];
      DeviceTensor gd(gpu(), ss, act());
      gpu().fill(gd, 7.0f);  // overwritten everywhere, padding included
      gpu().cross_entropy_backward_shard(gd, gz, glse, *gtargets, dloss, shard);
      const auto got = gd.download();
      expect_close(got, want, act_tolerance(act(), Measure::max_rel), "shard dlogits " + what);
      bool zeros_kept = true;  // padding columns and ignored rows: exactly zero
      for (std::int64_t n = 0; n < rows; ++n)
        for (std::int64_t v = 0; v < split.width; ++v)
          if (v >= shard.valid || targets[static_cast<std::size_t>(n)] < 0)
            zeros_kept = zeros_kept && got[static_cast<std::size_t>(n * split.width + v)] == 0.0f;
      EXPECT_TRUE(zeros_kept) << "a padding column or an ignored row has a nonzero gradient; " << what;

      // dlogits may alias logits, as the model does to spare a (N, Vs) buffer.
      gpu().cross_entropy_backward_shard(gz, gz, glse, *gtargets, dloss, shard);
      expect_close(gz.download(), want, act_tolerance(act(), Measure::max_rel), "shard dlogits in place " + what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuVocabCrossEntropyTest, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
