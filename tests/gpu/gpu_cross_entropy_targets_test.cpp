// Cross-entropy targets outside [0, V) on the CUDA backend. Any negative target is ignored
// (loss 0, zero gradient), as on the CPU. A target >= V is a bug upstream: the CPU reference
// refuses it on the host, but the GPU's targets are in device memory, so its kernels mark the
// row instead: NaN loss, lse and gradient (a step with a non-finite loss is skipped), without
// reading outside the row. Every other row must match the CPU, which gets the same logits and
// targets with the bad ones ignored (rows are independent). Tolerances: gpu_test_support.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

class GpuCrossEntropyTargetsTest : public GpuActTest {};

// 1013 columns: no 16-byte rows in any dtype; 1024: 16-byte rows in every dtype.
const std::int64_t kVocabs[] = {1013, 1024};

// Valid targets (the first and last ids among them), ignored ones (-1, -100, the most
// negative int) and ones past the vocabulary (V, V + 1, the largest int).
std::vector<std::int32_t> targets_in_and_out_of_range(std::int64_t vocab) {
  const auto v = static_cast<std::int32_t>(vocab);
  auto t = random_ids(14, v, 70);
  t[0] = 0;
  t[1] = -1;
  t[2] = v;
  t[3] = -100;
  t[5] = v - 1;
  t[6] = std::numeric_limits<std::int32_t>::max();
  t[8] = std::numeric_limits<std::int32_t>::min();
  t[9] = v + 1;
  return t;
}

TEST_P(GpuCrossEntropyTargetsTest, NegativeTargetsAreIgnoredAndTargetsPastTheVocabularyMarkOnlyTheirRow) {
  for (const std::int64_t vocab : kVocabs) {
    const auto targets = targets_in_and_out_of_range(vocab);
    const auto rows = static_cast<std::int64_t>(targets.size());
    const std::string at = " N=" + std::to_string(rows) + " V=" + std::to_string(vocab);
    const Shape ls{rows, vocab}, rs{rows};
    auto logits = random_values(static_cast<std::size_t>(ls.numel()), 71, act(), -4.0f, 4.0f);
    std::vector<std::int32_t> cpu_targets = targets;  // what the CPU accepts: the bad rows ignored
    std::int64_t counted = 0;
    for (auto& t : cpu_targets) {
      if (t >= vocab) t = -1;
      counted += t >= 0 ? 1 : 0;
    }
    const float dloss = 1.0f / static_cast<float>(counted);

    std::vector<float> losses(static_cast<std::size_t>(rows)), lse(losses.size()), dlogits(logits.size());
    cpu().cross_entropy_forward(host(losses, rs), host(lse, rs), host(logits, ls), host_ids(cpu_targets, rs));
    cpu().cross_entropy_backward(host(dlogits, ls), host(logits, ls), host(lse, rs), host_ids(cpu_targets, rs),
                                 dloss);

    auto glogits = on_device(gpu(), logits, ls, act());
    auto gtargets = ids_on_device(gpu(), targets);
    DeviceTensor glosses(gpu(), rs, DType::f32), glse(gpu(), rs, DType::f32), gdlogits(gpu(), ls, act());
    gpu().cross_entropy_forward(glosses, glse, *glogits, *gtargets);
    gpu().cross_entropy_backward(gdlogits, *glogits, glse, *gtargets, dloss);
    const auto got_losses = glosses.download(), got_lse = glse.download(), got_d = gdlogits.download();

    // The rows the CPU computes too, and the marked ones.
    std::vector<float> good_losses, want_losses, good_lse, want_lse, good_d, want_d;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const auto row = static_cast<std::ptrdiff_t>(i) * vocab;
      const std::string which = "row " + std::to_string(i) + " (target " + std::to_string(targets[i]) + ")" + at;
      if (targets[i] >= vocab) {
        EXPECT_TRUE(std::isnan(got_losses[i])) << "loss of " << which << " is " << got_losses[i] << ", not NaN";
        EXPECT_TRUE(std::isnan(got_lse[i])) << "lse of " << which << " is " << got_lse[i] << ", not NaN";
        bool all_nan = true;
        for (std::int64_t v = 0; v < vocab; ++v) all_nan = all_nan && std::isnan(got_d[row + v]);
        EXPECT_TRUE(all_nan) << "the gradient of " << which << " is not NaN throughout";
        continue;
      }
      good_losses.push_back(got_losses[i]);
      want_losses.push_back(losses[i]);
      good_d.insert(good_d.end(), got_d.begin() + row, got_d.begin() + row + vocab);
      want_d.insert(want_d.end(), dlogits.begin() + row, dlogits.begin() + row + vocab);
      if (targets[i] >= 0) {
        good_lse.push_back(got_lse[i]);
        want_lse.push_back(lse[i]);
        continue;
      }
      EXPECT_EQ(got_losses[i], 0.0f) << "loss of ignored " << which;
      bool zero_row = true;
      for (std::int64_t v = 0; v < vocab; ++v) zero_row = zero_row && got_d[row + v] == 0.0f;
      EXPECT_TRUE(zero_row) << "ignored " << which << " has a nonzero gradient";
    }
    expect_close(good_losses, want_losses, fp32_tolerance(Measure::max_rel), "cross-entropy losses, other rows" + at);
    expect_close(good_lse, want_lse, fp32_tolerance(Measure::max_rel), "cross-entropy lse, counted rows" + at);
    expect_close(good_d, want_d, act_tolerance(act(), Measure::max_rel), "cross-entropy dlogits, other rows" + at);
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuCrossEntropyTargetsTest, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
