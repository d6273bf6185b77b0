// make_fp8_backend: the FP8 backend for a device.
#include "kernels/fp8_backend.h"

#include <string>

#include "kernels/cpu/cpu_fp8_backend.h"
#include "kernels/error.h"

#ifdef USTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/fp8/cuda_fp8_backend.h"
#endif

namespace ustrain {

std::unique_ptr<Backend> make_fp8_backend(Device device, int threads, int device_index, const fp8::Config& config) {
  if (device == Device::cpu) {
    if (threads < 0)
      throw UserError("device.threads must be 0 (all cores) or a positive count, got " + std::to_string(threads));
    return std::make_unique<CpuFp8Backend>(threads, config);
  }
#ifdef USTRAIN_HAVE_CUDA
  if (cuda::device_count() > 0) return std::make_unique<cuda::CudaFp8Backend>(device_index, config);
#endif
  (void)device_index;
  return make_backend(device, threads, device_index);  // throws the reason there is no GPU backend
}

}  // namespace ustrain
