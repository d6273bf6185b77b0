// The CUDA libraries' name for an activation dtype: what cuBLAS and cuBLASLt call f32, bf16 and
// f16. Plain C++ (no device code).
#pragma once

#include <library_types.h>

#include <string>

#include "kernels/error.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

// `what` names the caller in the message for any other dtype (an internal error: the ops check
// their dtypes first).
inline cudaDataType_t cuda_data_type(DType t, const char* what) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: break;
  }
  USTRAIN_ASSERT(false, std::string(what) + ": unsupported dtype " + dtype_name(t));
  return CUDA_R_32F;
}

}  // namespace ustrain::cuda
