#include "kernels/cuda/cuda_check.h"

#include <cstdlib>

namespace ustrain::cuda {
namespace {

// Read once: the switch holds for the whole process.
bool sync_after_launch() {
  static const bool on = [] {
    const char* v = std::getenv("USTRAIN_CUDA_SYNC");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

}  // namespace

void check_launch(const char* file, int line) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && sync_after_launch()) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) return;
  fail_cuda(err,
            sync_after_launch() ? "the kernel launched here"
                                : "the kernel launched here, or one before it (USTRAIN_CUDA_SYNC=1 names the one "
                                  "that faulted)",
            file, line);
}

}  // namespace ustrain::cuda
