// Scaling in every float dtype. The backend's scale() takes fp32 only, like the CPU's (its
// callers scale fp32 gradients: clipping, loss scaling), and refuses 16-bit tensors; the CUDA
// kernel behind it (kernels/cuda/elementwise.h) scales bf16 and fp16 in place too, so that
// kernel is called here directly, on the backend's stream. It computes one fp32 multiply and
// rounds it to nearest even: exactly the CPU's fp32 product rounded to the dtype on the host,
// bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "kernels/cuda/elementwise.h"

namespace ustrain::gpu_test {
namespace {

class GpuScaleTest : public GpuActTest {};

TEST_P(GpuScaleTest, ScaleKernelRoundsTheFp32ProductLikeTheCpuInEveryDtype) {
  for (std::int64_t n : {1, 13, 50001})
    for (std::int64_t offset : {0, 1})  // 16-byte packs, or a start off the boundary (element by element)
      for (float factor : {0.3f, 1024.0f, 1.0f / 1024.0f}) {
        const std::int64_t total = offset + n;
        const auto x = random_values(static_cast<std::size_t>(total), 110, act());
        auto want = x;  // the element before the range is not scaled
        cpu().scale(host(want, {total}).slice(offset, total), factor);
        want = rounded(want, act());
        auto d = on_device(gpu(), x, {total}, act());
        const Tensor range = d->tensor().slice(offset, total);
        cuda::scale(range.data, factor, n, act(), gpu().compute_stream());
        EXPECT_TRUE(same_bits(d->download(), want)) << "scale by " << factor << " of " << n << " " << dtype_name(act())
                                                    << " values from element " << offset;
      }
}

TEST_F(GpuTest, BackendScaleRefuses16BitTensorsLikeTheCpu) {
  for (DType t : {DType::bf16, DType::f16}) {
    const auto x = random_values(64, 111, t);
    auto d = on_device(gpu(), x, {64}, t);
    EXPECT_THROW(gpu().scale(*d, 2.0f), std::logic_error) << dtype_name(t);
    EXPECT_TRUE(same_bits(d->download(), x)) << "a refused scale() changed its " << dtype_name(t) << " tensor";
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuScaleTest, ::testing::Values(DType::f32, DType::bf16, DType::f16), act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
