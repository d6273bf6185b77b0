// The backend of train.precision = "fp8" for a device: the CPU's emulation of FP8 GEMMs
// (kernels/cpu/cpu_fp8_backend.h) or the GPU's cuBLASLt FP8 GEMMs
// (kernels/cuda/fp8/cuda_fp8_backend.h). Throws UserError as make_backend does when the device is
// not available.
#pragma once

#include <memory>

#include "kernels/backend.h"
#include "kernels/fp8/fp8_scaling.h"

namespace ustrain {

std::unique_ptr<Backend> make_fp8_backend(Device device, int threads, int device_index, const fp8::Config& config);

}  // namespace ustrain
