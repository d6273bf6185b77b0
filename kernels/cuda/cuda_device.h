// CUDA device discovery. Plain C++ header: safe to include from any translation unit.
#pragma once

#include <string>

namespace ustrain::cuda {

// Number of usable GPUs; 0 when there is no driver or no device (never throws).
int device_count();
// Why device_count() is 0, in the CUDA runtime's own words (driver too old, no device, a
// library that did not load); empty when a GPU is visible.
std::string device_count_error();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for device i, or why it cannot be queried.
std::string device_description(int index);
// Device i's UUID in hex ("" if it cannot be queried): the same GPU whatever
// CUDA_VISIBLE_DEVICES calls it in each process.
std::string device_uuid(int index);
// The CUDA runtime version this binary was built against, e.g. "13.0".
std::string runtime_version();

}  // namespace ustrain::cuda
