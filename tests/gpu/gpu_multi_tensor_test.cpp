// The CUDA ops over many tensors at once against the CPU reference (one call per tensor):
// multi-tensor AdamW and the sum of squares of all gradients. The tensors are ranges of one
// flat buffer, as the parameter store lays them out, with more ranges than one launch takes
// (32 for both kernels), sizes around AdamW's 8192-element tile, empty ranges and ranges
// that start off any 16-byte boundary. Tolerances: gpu_test_support.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

// Where a range lies in the flat buffer: [offset, offset + size).
struct Range {
  std::int64_t offset, size;
};

// `count` ranges cycling through `sizes`, each after a one-element gap (a range that writes
// past its end overwrites the gap), so most start off a 16-byte boundary.
std::vector<Range> ranges_of(const std::vector<std::int64_t>& sizes, int count) {
  std::vector<Range> ranges;
  std::int64_t at = 0;
  for (int i = 0; i < count; ++i) {
    const std::int64_t size = sizes[static_cast<std::size_t>(i) % sizes.size()];
    ranges.push_back({at + 1, size});
    at += 1 + size;
  }
  return ranges;
}

std::int64_t flat_size(const std::vector<Range>& ranges) { return ranges.back().offset + ranges.back().size + 1; }

// The range of a flat tensor (host or device).
Tensor range_of(const Tensor& flat, Range r) { return flat.slice(r.offset, r.offset + r.size); }

// ---- AdamW over many ranges ----

TEST_F(GpuTest, AdamWMultiMatchesCpuPerRangeWeightDecayOverSeveralSteps) {
  const auto ranges = ranges_of({8192, 1, 8193, 0, 37, 8191, 20000, 3}, 70);  // 3 launches of 32
  const std::int64_t n = flat_size(ranges);
  auto param = random_values(static_cast<std::size_t>(n), 80, DType::f32);
  std::vector<float> m(param.size(), 0.0f), v(param.size(), 0.0f);
  auto dp = on_device(gpu(), param, {n}, DType::f32), dm = on_device(gpu(), m, {n}, DType::f32),
       dv = on_device(gpu(), v, {n}, DType::f32);
  DeviceTensor dg(gpu(), {n}, DType::f32);
  const std::vector<float> initial = param;

  for (std::int64_t step = 1; step <= 3; ++step) {
    auto grad = random_values(static_cast<std::size_t>(n), 90 + static_cast<std::uint32_t>(step), DType::f32, -2.0f,
                              2.0f);
    dg.upload(grad);
    // Each range's decay overrides this one: a kernel that uses it shows.
    const AdamWParams p{/*lr=*/1e-2f, /*beta1=*/0.9f, /*beta2=*/0.95f, /*eps=*/1e-8f, /*weight_decay=*/0.5f, step};
    std::vector<AdamWTensors> cpu_ranges, gpu_ranges;
    const Tensor hp = host(param, {n}), hg = host(grad, {n}), hm = host(m, {n}), hv = host(v, {n});
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const float decay = i % 3 == 0 ? 0.0f : (i % 3 == 1 ? 0.1f : 0.01f);  // norms and biases take none
      const Range r = ranges[i];
      cpu_ranges.push_back({range_of(hp, r), range_of(hg, r), range_of(hm, r), range_of(hv, r), decay});
      gpu_ranges.push_back({range_of(*dp, r), range_of(dg, r), range_of(*dm, r), range_of(*dv, r), decay});
    }
    cpu().adamw_multi(cpu_ranges, p);
    gpu().adamw_multi(gpu_ranges, p);
    const std::string at = "step " + std::to_string(step) + ", " + std::to_string(ranges.size()) + " ranges";
    const auto got_param = dp->download();
    expect_close(got_param, param, fp32_tolerance(Measure::max_rel), "adamw_multi param, " + at);
    expect_close(dm->download(), m, fp32_tolerance(Measure::max_rel), "adamw_multi m, " + at);
    expect_close(dv->download(), v, fp32_tolerance(Measure::max_rel), "adamw_multi v, " + at);
    // The gaps between ranges belong to no range: untouched.
    bool gaps_kept = true;
    for (const Range r : ranges) {
      const auto gap = static_cast<std::size_t>(r.offset - 1);
      gaps_kept = gaps_kept && std::memcmp(&got_param[gap], &initial[gap], 4) == 0;
    }
    EXPECT_TRUE(gaps_kept) << "adamw_multi wrote outside its ranges, " << at;
  }
}

// The gradient scale and the compute copies the update writes in the same pass: parameters
// as the CPU's (scale, update, then convert), and each bf16 copy exactly the GPU's own
// updated fp32 values rounded once.
TEST_F(GpuTest, AdamWMultiScalesGradientsAndWritesComputeCopies) {
  const auto ranges = ranges_of({8192, 1, 8193, 0, 37, 20000}, 40);  // 2 launches of 32
  const std::int64_t n = flat_size(ranges);
  auto param = random_values(static_cast<std::size_t>(n), 81, DType::f32);
  std::vector<float> m(param.size(), 0.0f), v(param.size(), 0.0f);
  auto dp = on_device(gpu(), param, {n}, DType::f32), dm = on_device(gpu(), m, {n}, DType::f32),
       dv = on_device(gpu(), v, {n}, DType::f32);
  DeviceTensor dg(gpu(), {n}, DType::f32), dcopy(gpu(), {n}, DType::bf16);
  auto grad = random_values(static_cast<std::size_t>(n), 91, DType::f32, -2.0f, 2.0f);
  dg.upload(grad);
  AdamWParams p{/*lr=*/1e-2f, /*beta1=*/0.9f, /*beta2=*/0.95f, /*eps=*/1e-8f, /*weight_decay=*/0.1f, /*step=*/1};
  p.grad_scale = 0.37f;
  std::vector<AdamWTensors> cpu_ranges, gpu_ranges;
  const Tensor hp = host(param, {n}), hg = host(grad, {n}), hm = host(m, {n}), hv = host(v, {n});
  for (const Range r : ranges) {
    cpu_ranges.push_back({range_of(hp, r), range_of(hg, r), range_of(hm, r), range_of(hv, r), 0.1f});
    gpu_ranges.push_back({range_of(*dp, r), range_of(dg, r), range_of(*dm, r), range_of(*dv, r), 0.1f,
                          range_of(dcopy, r)});
  }
  cpu().adamw_multi(cpu_ranges, p);
  gpu().adamw_multi(gpu_ranges, p);
  const auto got_param = dp->download();
  expect_close(got_param, param, fp32_tolerance(Measure::max_rel), "adamw_multi with a gradient scale");
  EXPECT_EQ(dg.download(), grad) << "the update scales the gradients it reads, not the stored ones";
  const auto got_copy = dcopy.download();
  bool copies_match = true;
  for (const Range r : ranges)
    for (std::int64_t i = r.offset; i < r.offset + r.size; ++i)
      copies_match = copies_match && got_copy[static_cast<std::size_t>(i)] ==
                                         rounded({got_param[static_cast<std::size_t>(i)]}, DType::bf16)[0];
  EXPECT_TRUE(copies_match) << "a compute copy differs from its updated parameter rounded to bf16";
}

// ---- sum of squares over many tensors ----

// As SumOfSquaresMatchesCpu (gpu_ops_test.cpp): sums in double agree to 1e-7 relative.
TEST_F(GpuTest, SumOfSquaresMultiMatchesCpuOverManyTensors) {
  const auto ranges = ranges_of({1000, 0, 1, (std::int64_t{1} << 20) + 3, 7, 65536, 12345}, 75);  // 3 launches of 32
  const std::int64_t n = flat_size(ranges);
  // Every range on its own scale, so one left out or counted twice shows; the gaps hold
  // large values, so a range read past its end shows.
  std::vector<float> x(static_cast<std::size_t>(n), 1000.0f);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const float scale = 0.5f + static_cast<float>(i % 9);
    const auto values = random_values(static_cast<std::size_t>(ranges[i].size), 100 + static_cast<std::uint32_t>(i),
                                      DType::f32, -scale, scale);
    std::copy(values.begin(), values.end(), x.begin() + ranges[i].offset);
  }
  auto dx = on_device(gpu(), x, {n}, DType::f32);
  std::vector<Tensor> cpu_tensors, gpu_tensors;
  for (const Range r : ranges) {
    cpu_tensors.push_back(range_of(host(x, {n}), r));
    gpu_tensors.push_back(range_of(*dx, r));
  }
  for (std::size_t count : {std::size_t{1}, std::size_t{32}, std::size_t{33}, ranges.size()}) {
    const std::span<const Tensor> cpu_span(cpu_tensors.data(), count), gpu_span(gpu_tensors.data(), count);
    const double want = cpu().sum_of_squares_multi(cpu_span);
    const double got = gpu().sum_of_squares_multi(gpu_span);
    EXPECT_NEAR(got, want, 1e-7 * want) << count << " tensors";
  }
  EXPECT_EQ(gpu().sum_of_squares_multi({}), 0.0) << "no tensors";
}

}  // namespace
}  // namespace ustrain::gpu_test
