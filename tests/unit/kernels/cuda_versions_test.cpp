// The CUDA backend's version line (kernels/cuda/cuda_versions.h): decoding and what a machine
// without a driver reports.
#include <gtest/gtest.h>

#ifdef USTRAIN_HAVE_CUDA

#include "kernels/cuda/cuda_versions.h"

namespace ustrain::cuda {
namespace {

TEST(CudaVersions, DescribesEachEncoding) {
  const CudaVersions v{13000, 12080, 130102, 90600, 91900};
  EXPECT_EQ(describe(v), "CUDA driver 13.0, runtime 12.8, cuBLASLt 13.1.2, cuDNN 9.6.0 (built with 9.19.0)");
  EXPECT_EQ(describe(CudaVersions{0, 13000, 130100, 91900, 91900}),
            "CUDA driver none, runtime 13.0, cuBLASLt 13.1.0, cuDNN 9.19.0 (built with 9.19.0)");
}

TEST(CudaVersions, ReadsTheLibrariesItLoaded) {
  const CudaVersions v = read_cuda_versions();  // no GPU needed
  EXPECT_GE(v.runtime, 12000);
  EXPECT_GE(v.cublaslt, 120000u);
  EXPECT_GE(v.cudnn, 90000u);
  EXPECT_GE(v.cudnn_built, 90000u);
}

}  // namespace
}  // namespace ustrain::cuda

#endif
