// make_backend: the op backend for a device.
#include "kernels/backend.h"

#include "kernels/cpu/cpu_backend.h"

#ifdef USTRAIN_HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

namespace ustrain {

std::unique_ptr<Backend> make_backend(Device device, int threads) {
  if (threads < 0)
    throw UserError("device.threads must be 0 (all cores) or a positive count, got " + std::to_string(threads));
  switch (device) {
    case Device::cpu:
      return std::make_unique<CpuBackend>(threads);
    case Device::cuda: {
      std::string msg = "device.type = \"cuda\": this build has no CUDA ops yet";
#ifdef USTRAIN_HAVE_CUDA
      const int gpus = cuda::device_count();
      msg += " (" + std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") + " visible)";
#endif
      throw UserError(msg + "; set device.type = \"cpu\"");
    }
  }
  USTRAIN_ASSERT(false, "unknown device");
  return nullptr;
}

}  // namespace ustrain
