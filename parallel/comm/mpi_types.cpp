#include "parallel/comm/mpi_types.h"

#include <fmt/format.h>

#include <limits>

#include "parallel/comm/bf16.h"

namespace ustrain::mpi_detail {
namespace {

void bf16_sum_op(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16::sum_into(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout), *len);
}
void f16_sum_op(void* in, void* inout, int* len, MPI_Datatype*) {
  f16::sum_into(static_cast<const _Float16*>(in), static_cast<_Float16*>(inout), *len);
}

}  // namespace

HalfSumOps create_half_sum_ops() {
  HalfSumOps ops;
  MPI_Op_create(&bf16_sum_op, /*commute=*/1, &ops.bf16);
  MPI_Op_create(&f16_sum_op, /*commute=*/1, &ops.f16);
  return ops;
}

void free_half_sum_ops(HalfSumOps& ops) {
  MPI_Op_free(&ops.bf16);
  MPI_Op_free(&ops.f16);
}

MPI_Datatype transfer_type(DType t) {
  switch (dtype_size(t)) {
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    case 8: return MPI_UINT64_T;
  }
  USTRAIN_ASSERT(false, fmt::format("no MPI transfer type for {}", dtype_name(t)));
}

MPI_Datatype reduce_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
    default: break;
  }
  USTRAIN_ASSERT(false, fmt::format("the MPI backend does not reduce {}", dtype_name(t)));
}

MPI_Op reduce_operation(DType t, const HalfSumOps& half) {
  if (t == DType::bf16) return half.bf16;
  if (t == DType::f16) return half.f16;
  return MPI_SUM;
}

int mpi_count(std::int64_t n, const char* op) {
  USTRAIN_ASSERT(n <= std::numeric_limits<int>::max(),
                 fmt::format("{} of {} elements: MPI counts are ints; split the buffer", op, n));
  return static_cast<int>(n);
}

void divide_in_place(const Tensor& data, int divisor) {
  if (data.dtype == DType::bf16) {
    bf16::divide(static_cast<std::uint16_t*>(data.data), data.numel(), static_cast<float>(divisor));
    return;
  }
  if (data.dtype == DType::f16) {
    f16::divide(static_cast<_Float16*>(data.data), data.numel(), static_cast<float>(divisor));
    return;
  }
  if (data.dtype == DType::f64) {
    auto* x = static_cast<double*>(data.data);
    for (std::int64_t i = 0; i < data.numel(); ++i) x[i] /= divisor;
    return;
  }
  float* x = data.f32();
  const float d = static_cast<float>(divisor);
  for (std::int64_t i = 0; i < data.numel(); ++i) x[i] /= d;
}

}  // namespace ustrain::mpi_detail
