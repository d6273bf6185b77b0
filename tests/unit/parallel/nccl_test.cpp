// The NCCL communicator in one process: a group of one on GPU 0 where a GPU exists, and the
// error a user sees where none does. (Multi-GPU runs need one GPU per rank.)
#include <gtest/gtest.h>

#ifdef USTRAIN_HAVE_NCCL
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "parallel/comm/nccl_communicator.h"
#include "parallel/comm/self_communicator.h"

namespace ustrain {
namespace {

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(NcclCommunicator, WithoutAGpuIsAUserErrorNamingTheDevice) {
  if (have_gpu()) GTEST_SKIP() << "this machine has a GPU";
  SelfCommunicator bootstrap(0, "dp");
  try {
    NcclCommunicator nccl(bootstrap, "dp", 0, CommOptions{});
    FAIL() << "an NCCL communicator was created without a GPU";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 cannot use CUDA device 0 for the dp group (rank 0)"),
              std::string::npos)
        << e.what();
  }
}

TEST(NcclCommunicator, GroupOfOneOnTheGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU on this machine: the NCCL communicator was not run";
  SelfCommunicator bootstrap(0, "dp");
  NcclCommunicator nccl(bootstrap, "dp", 0, CommOptions{std::chrono::seconds(30)});
  EXPECT_EQ(nccl.name(), "dp group (rank 0)");
  const std::vector<float> host = {1.5f, -2.0f, 3.25f, 8.0f};
  void* raw = nullptr;
  ASSERT_EQ(cudaMalloc(&raw, 2 * host.size() * sizeof(float)), cudaSuccess);
  float* device = static_cast<float*>(raw);
  ASSERT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  const Tensor data(device, Shape{4}, DType::f32, Device::cuda);
  const Tensor other(device + 4, Shape{4}, DType::f32, Device::cuda);
  nccl.all_reduce(data, ReduceOp::avg).wait();
  nccl.reduce_scatter(other, data).wait();  // a group of one: a copy
  nccl.all_gather(data, data).wait();       // in place
  nccl.barrier().wait();
  std::vector<float> back(8);
  ASSERT_EQ(cudaMemcpy(back.data(), device, back.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(device);
  EXPECT_EQ(std::vector<float>(back.begin(), back.begin() + 4), host);
  EXPECT_EQ(std::vector<float>(back.begin() + 4, back.end()), host);
}

}  // namespace
}  // namespace ustrain
#endif
