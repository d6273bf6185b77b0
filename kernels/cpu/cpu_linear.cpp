// Linear layer, weight (O, I) as Hugging Face stores it: out = x @ W^T. GEMMs in OpenBLAS.
#include <cblas.h>

#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/parallel_gemm.h"

namespace ustrain {
namespace {

int blas_int(std::int64_t v) {
  USTRAIN_ASSERT(v <= 0x7FFFFFFF, "GEMM dimension " + std::to_string(v) + " exceeds the BLAS int range");
  return static_cast<int>(v);
}

}  // namespace

void CpuBackend::linear_forward(Tensor out, Tensor x, Tensor weight) {
  const std::int64_t rows = x.shape.rows();
  const std::int64_t in = x.shape.last();
  USTRAIN_ASSERT(weight.shape.rank() == 2 && weight.shape[1] == in,
                 "weight " + weight.shape.str() + " for input width " + std::to_string(in));
  const std::int64_t outs = weight.shape[0];
  USTRAIN_ASSERT(out.shape.rows() == rows && out.shape.last() == outs,
                 "out " + out.shape.str() + " for " + std::to_string(rows) + " rows of " + std::to_string(outs));
  if (rows == 0 || outs == 0) return;
  if (in == 0) return fill(out, 0.0f);
  // (N, O) = (N, I) @ (O, I)^T
  cpu::parallel_sgemm(threads_, CblasNoTrans, CblasTrans, blas_int(rows), blas_int(outs), blas_int(in), 1.0f, x.f32(),
                      blas_int(in), weight.f32(), blas_int(in), 0.0f, out.f32(), blas_int(outs));
}

void CpuBackend::linear_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight) {
  const std::int64_t rows = x.shape.rows();
  const std::int64_t in = x.shape.last();
  USTRAIN_ASSERT(weight.shape.rank() == 2 && weight.shape[1] == in,
                 "weight " + weight.shape.str() + " for input width " + std::to_string(in));
  const std::int64_t outs = weight.shape[0];
  USTRAIN_ASSERT(dweight.shape == weight.shape, "dweight " + dweight.shape.str() + " vs weight " + weight.shape.str());
  USTRAIN_ASSERT(dout.shape.rows() == rows && dout.shape.last() == outs,
                 "dout " + dout.shape.str() + " for " + std::to_string(rows) + " rows of " + std::to_string(outs));
  if (!dx.empty())
    USTRAIN_ASSERT(dx.shape.rows() == rows && dx.shape.last() == in, "dx " + dx.shape.str() + " vs x " + x.shape.str());
  if (rows == 0 || in == 0) return;
  if (outs == 0) {
    if (!dx.empty()) fill(dx, 0.0f);
    return;
  }
  if (!dx.empty()) {
    // (N, I) = (N, O) @ (O, I)
    cpu::parallel_sgemm(threads_, CblasNoTrans, CblasNoTrans, blas_int(rows), blas_int(in), blas_int(outs), 1.0f,
                        dout.f32(), blas_int(outs), weight.f32(), blas_int(in), 0.0f, dx.f32(), blas_int(in));
  }
  // (O, I) += (N, O)^T @ (N, I)
  cpu::parallel_sgemm(threads_, CblasTrans, CblasNoTrans, blas_int(outs), blas_int(in), blas_int(rows), 1.0f,
                      dout.f32(), blas_int(outs), x.f32(), blas_int(in), 1.0f, dweight.f32(), blas_int(in));
}

}  // namespace ustrain
