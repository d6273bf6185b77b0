#include "kernels/cpu/parallel_gemm.h"

#include <algorithm>
#include <cstdint>

namespace ustrain::cpu {
namespace {

// Below this many multiply-adds one call is faster than waking the team.
constexpr std::int64_t kParallelWork = 1 << 18;
// Blocks of C are multiples of this many rows or columns, to keep GEMM kernel tiles whole.
constexpr int kAlign = 16;

}  // namespace

void parallel_sgemm(int threads, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  const bool split_rows = m >= n;
  const int extent = split_rows ? m : n;
  const int max_parts = std::max(1, extent / kAlign);
  const std::int64_t work = static_cast<std::int64_t>(m) * n * k;
  const int parts = work < kParallelWork ? 1 : std::min(threads, max_parts);
  if (parts <= 1) {
    cblas_sgemm(CblasRowMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int block = (extent + parts - 1) / parts;
  const int step = (block + kAlign - 1) / kAlign * kAlign;
#pragma omp parallel for schedule(static) num_threads(parts)
  for (int p = 0; p < parts; ++p) {
    const int begin = p * step;
    const int size = std::min(step, extent - begin);
    if (size <= 0) continue;
    if (split_rows) {
      // Rows [begin, begin + size) of op(A) and C.
      const float* a_part = trans_a == CblasNoTrans ? a + static_cast<std::int64_t>(begin) * lda : a + begin;
      cblas_sgemm(CblasRowMajor, trans_a, trans_b, size, n, k, alpha, a_part, lda, b, ldb, beta,
                  c + static_cast<std::int64_t>(begin) * ldc, ldc);
    } else {
      // Columns [begin, begin + size) of op(B) and C.
      const float* b_part = trans_b == CblasNoTrans ? b + begin : b + static_cast<std::int64_t>(begin) * ldb;
      cblas_sgemm(CblasRowMajor, trans_a, trans_b, m, size, k, alpha, a, lda, b_part, ldb, beta, c + begin, ldc);
    }
  }
}

}  // namespace ustrain::cpu
