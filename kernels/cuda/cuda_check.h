// Error checks for CUDA runtime calls and kernel launches. Plain C++ (no device code), so
// .cu and .cpp files alike can use it.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/error.h"

namespace ustrain::cuda {

[[noreturn]] inline void fail_cuda(cudaError_t err, const char* expr, const char* file, int line) {
  ::ustrain::assertion_failed(expr, file, line, std::string("CUDA error: ") + cudaGetErrorString(err));
}

}  // namespace ustrain::cuda

// Any failing runtime call is an internal error (the GPU and its driver were checked at start).
#define USTRAIN_CUDA_CHECK(expr)                                                     \
  do {                                                                               \
    const cudaError_t ustrain_err_ = (expr);                                         \
    if (ustrain_err_ != cudaSuccess) ::ustrain::cuda::fail_cuda(ustrain_err_, #expr, __FILE__, __LINE__); \
  } while (0)

namespace ustrain::cuda {

// After a <<<...>>> launch at file:line: a bad configuration fails at once. Under
// USTRAIN_CUDA_SYNC=1 the device is also synchronised, so that a fault inside the kernel
// (an illegal address, say) is reported at the launch that caused it, not at a later call.
void check_launch(const char* file, int line);

}  // namespace ustrain::cuda

#define USTRAIN_CUDA_CHECK_LAUNCH() ::ustrain::cuda::check_launch(__FILE__, __LINE__)
