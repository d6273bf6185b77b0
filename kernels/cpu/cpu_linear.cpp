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

void CpuBackend::linear_backward_input(Tensor dx, Tensor dout, Tensor weight) {
  USTRAIN_ASSERT(weight.shape.rank() == 2, "weight " + weight.shape.str() + " is not a matrix");
  const std::int64_t outs = weight.shape[0], in = weight.shape[1], rows = dout.shape.rows();
  USTRAIN_ASSERT(dout.shape.last() == outs, "dout " + dout.shape.str() + " for weight " + weight.shape.str());
  USTRAIN_ASSERT(dx.shape.rows() == rows && dx.shape.last() == in,
                 "dx " + dx.shape.str() + " for dout " + dout.shape.str() + " and weight " + weight.shape.str());
  if (rows == 0 || in == 0) return;
  if (outs == 0) return fill(dx, 0.0f);
  // (N, I) = (N, O) @ (O, I)
  cpu::parallel_sgemm(threads_, CblasNoTrans, CblasNoTrans, blas_int(rows), blas_int(in), blas_int(outs), 1.0f,
                      dout.f32(), blas_int(outs), weight.f32(), blas_int(in), 0.0f, dx.f32(), blas_int(in));
}

void CpuBackend::linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) {
  USTRAIN_ASSERT(dweight.shape.rank() == 2, "dweight " + dweight.shape.str() + " is not a matrix");
  const std::int64_t outs = dweight.shape[0], in = dweight.shape[1], rows = x.shape.rows();
  USTRAIN_ASSERT(x.shape.last() == in, "x " + x.shape.str() + " for dweight " + dweight.shape.str());
  USTRAIN_ASSERT(dout.shape.rows() == rows && dout.shape.last() == outs,
                 "dout " + dout.shape.str() + " for " + std::to_string(rows) + " rows of " + std::to_string(outs));
  if (rows == 0 || in == 0 || outs == 0) return;
  // (O, I) += (N, O)^T @ (N, I)
  cpu::parallel_sgemm(threads_, CblasTrans, CblasNoTrans, blas_int(outs), blas_int(in), blas_int(rows), 1.0f,
                      dout.f32(), blas_int(outs), x.f32(), blas_int(in), 1.0f, dweight.f32(), blas_int(in));
}

}  // namespace ustrain
