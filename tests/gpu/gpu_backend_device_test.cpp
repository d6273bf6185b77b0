// What the CUDA backend says about its device, for the memory plan's check and the device
// communicators: the stream it computes on, that synchronize() waits for it, and the GPU's
// free memory under its name. (Nothing here has a CPU counterpart to compare with.)
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

TEST_F(GpuTest, SynchronizeWaitsForTheComputeStream) {
  cudaStream_t stream = gpu().compute_stream();
  ASSERT_NE(stream, nullptr) << "the CUDA backend computes on a stream of its own";
  const std::int64_t n = std::int64_t{64} << 20;  // 256 MiB of f32: a fill that takes a while
  DeviceTensor big(gpu(), {n}, DType::f32);
  for (int i = 0; i < 8; ++i) gpu().fill(big, 0.5f + static_cast<float>(i));
  gpu().synchronize();
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess) << "work still queued after synchronize()";
}

// Free memory changes under other processes (ctest -j runs the GPU tests side by side), so
// only its range is checked, not its value.
TEST_F(GpuTest, AvailableMemoryIsNamedForGpu0AndWithinItsMemory) {
  EXPECT_EQ(gpu().memory_name(), "GPU 0");
  std::size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);  // of the current device, GPU 0
  const std::size_t available = gpu().available_memory_bytes();
  EXPECT_GT(available, std::size_t{0});
  EXPECT_LE(available, total_bytes) << "more available than the GPU holds";
}

}  // namespace
}  // namespace ustrain::gpu_test
