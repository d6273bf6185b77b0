// The CUDA backend's planned library workspace and host staging: GEMMs run in a workspace
// handed to the backend (and in their own again once it is taken back), and host staging is
// page-locked memory that copies go through both ways.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu_test_support.h"
#include "kernels/library_workspace.h"

namespace ustrain::gpu_test {
namespace {

// out (N, O) = x (N, I) @ w (O, I)^T on the GPU, in f32.
std::vector<float> gpu_linear(Backend& gpu, const std::vector<float>& x, const std::vector<float>& w, std::int64_t N,
                              std::int64_t I, std::int64_t O) {
  auto dx = on_device(gpu, x, {N, I}, DType::f32);
  auto dw = on_device(gpu, w, {O, I}, DType::f32);
  DeviceTensor out(gpu, {N, O}, DType::f32);
  gpu.linear_forward(out, *dx, *dw);
  return out.download();
}

TEST_F(GpuTest, GemmsRunInTheLibraryWorkspaceHandedToTheBackend) {
  const std::int64_t N = 64, I = 96, O = 80;
  std::vector<float> x = random_values(static_cast<std::size_t>(N * I), 1, DType::f32);
  std::vector<float> w = random_values(static_cast<std::size_t>(O * I), 2, DType::f32);
  std::vector<float> want(static_cast<std::size_t>(N * O));
  cpu().linear_forward(host(want, {N, O}), host(x, {N, I}), host(w, {O, I}));

  const std::size_t bytes = library_workspace_bytes(Device::cuda);
  void* workspace = gpu().allocate(bytes);
  gpu().use_library_workspace(workspace, bytes);
  const Tolerance tolerance = act_tolerance(DType::f32, Measure::norm_rel);
  expect_close(gpu_linear(gpu(), x, w, N, I, O), want, tolerance, "in the handed workspace");
  gpu().use_library_workspace(nullptr, 0);  // taken back before it is released
  gpu().release(workspace);
  expect_close(gpu_linear(gpu(), x, w, N, I, O), want, tolerance, "in its own workspace again");
}

TEST_F(GpuTest, HostStagingIsPageLockedAndCopiesGoThroughItBothWays) {
  const std::int64_t n = 1 << 20;
  HostStaging up = gpu().allocate_host_staging(static_cast<std::size_t>(n) * sizeof(float), "the test's upload");
  HostStaging back = gpu().allocate_host_staging(static_cast<std::size_t>(n) * sizeof(float), "the test's download");
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, up.get()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "host staging is not page-locked";

  auto* values = static_cast<float*>(up.get());
  for (std::int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 977) - 488.0f;
  DeviceTensor d(gpu(), {n}, DType::f32);
  gpu().copy(d, Tensor(up.get(), Shape{n}, DType::f32));
  gpu().copy(Tensor(back.get(), Shape{n}, DType::f32), d);
  gpu().synchronize();
  const auto* got = static_cast<const float*>(back.get());
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], values[i]) << "at " << i;

  EXPECT_EQ(gpu().allocate_host_staging(0, "nothing").get(), nullptr);
}

}  // namespace
}  // namespace ustrain::gpu_test
