// The versions of the CUDA pieces the backend runs on, read at run time (they may differ from
// the ones it was built with): logged once when the CUDA backend starts, so every GPU run's
// log says what it ran on. Plain C++ header.
#pragma once

#include <cstddef>
#include <string>

namespace ustrain::cuda {

struct CudaVersions {
  int driver = 0;             // the CUDA version the driver supports, 1000 major + 10 minor; 0: no driver
  int runtime = 0;            // cudart, same encoding
  std::size_t cublaslt = 0;   // 10000 major + 100 minor + patch
  std::size_t cudnn = 0;      // the same (cuDNN 9 on)
  std::size_t cudnn_built = 0;  // the cuDNN headers this binary was compiled with
};

CudaVersions read_cuda_versions();

// "CUDA driver 13.0, runtime 13.0, cuBLASLt 13.1.0, cuDNN 9.19.0 (built with 9.19.0)".
std::string describe(const CudaVersions& v);

}  // namespace ustrain::cuda
