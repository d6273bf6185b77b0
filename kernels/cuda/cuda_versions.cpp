#include "kernels/cuda/cuda_versions.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include <cudnn_version.h>

namespace ustrain::cuda {
namespace {

// 13000 -> "13.0" (the driver's and cudart's encoding).
std::string cuda_text(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// 91900 -> "9.19.0" (cuBLASLt's and cuDNN 9's encoding).
std::string library_text(std::size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace

CudaVersions read_cuda_versions() {
  CudaVersions v;
  // Both answer without a GPU; a failure leaves 0 ("none"), which is what it means.
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) v.driver = 0;
  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) v.runtime = 0;
  v.cublaslt = cublasLtGetVersion();
  v.cudnn = cudnnGetVersion();
  v.cudnn_built = CUDNN_VERSION;
  return v;
}

std::string describe(const CudaVersions& v) {
  return "CUDA driver " + cuda_text(v.driver) + ", runtime " + cuda_text(v.runtime) + ", cuBLASLt " +
         library_text(v.cublaslt) + ", cuDNN " + library_text(v.cudnn) + " (built with " +
         library_text(v.cudnn_built) + ")";
}

}  // namespace ustrain::cuda
