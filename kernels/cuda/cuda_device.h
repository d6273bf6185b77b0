// CUDA device discovery. Plain C++ header: safe to include from any translation unit.
#pragma once

#include <string>

namespace ustrain::cuda {

// Number of usable GPUs; 0 when there is no driver or no device (never throws).
int device_count();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for device i, or why it cannot be queried.
std::string device_description(int index);
// The CUDA runtime version this binary was built against, e.g. "13.0".
std::string runtime_version();

}  // namespace ustrain::cuda
