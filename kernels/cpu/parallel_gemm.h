// GEMM spread over the backend's OpenMP threads.
//
// OpenBLAS's own thread pool busy-waits after each call; on a small machine those spinning
// threads steal the cores from the OpenMP team of the next op, which then stalls at its
// barrier for a scheduler time slice. So the CPU backend keeps OpenBLAS single-threaded and
// splits every large GEMM into independent blocks of C, one single-threaded GEMM per thread.
// Each element of C is computed by exactly one call, in the same order of k, whatever the
// thread count.
#pragma once

#include <cblas.h>

namespace ustrain::cpu {

// C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C, row-major, on `threads` threads.
void parallel_sgemm(int threads, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace ustrain::cpu
