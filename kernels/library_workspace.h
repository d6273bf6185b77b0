// The device memory a backend's libraries work in, planned like every other buffer.
//
// On CUDA it is cuBLASLt's GEMM workspace, a fixed size chosen here (the algorithm search is
// limited to it, kernels/cuda/gemm/lt_gemm.h). The memory plan reserves it as the "library
// workspace" category and hands it to the backend (Backend::use_library_workspace), so the
// memory checks and `--dry-run` count it. The CPU backend needs none.
#pragma once

#include <cstddef>

#include "kernels/tensor.h"

namespace ustrain {

inline constexpr std::size_t kCublasLtWorkspaceBytes = std::size_t{32} << 20;

// Bytes of library workspace a backend of `device` takes from the plan.
inline constexpr std::size_t library_workspace_bytes(Device device) {
  return device == Device::cuda ? kCublasLtWorkspaceBytes : 0;
}

}  // namespace ustrain
