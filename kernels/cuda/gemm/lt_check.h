// USTRAIN_LT_CHECK: a failing cuBLASLt call is an internal error naming the call and status.
// Include from .cpp files that call cuBLASLt (it includes cublasLt.h).
#pragma once

#include <cublasLt.h>

#include <string>

#include "kernels/error.h"

namespace ustrain::cuda {

[[noreturn]] inline void fail_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  ::ustrain::assertion_failed(expr, file, line,
                              std::string("cuBLASLt error: ") + cublasLtGetStatusName(status) + " (" +
                                  std::to_string(static_cast<int>(status)) + ")");
}

}  // namespace ustrain::cuda

#define USTRAIN_LT_CHECK(expr)                                                                       \
  do {                                                                                               \
    const cublasStatus_t ustrain_status_ = (expr);                                                   \
    if (ustrain_status_ != CUBLAS_STATUS_SUCCESS)                                                    \
      ::ustrain::cuda::fail_cublas(ustrain_status_, #expr, __FILE__, __LINE__);                      \
  } while (0)
