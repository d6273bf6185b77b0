// Mapping ustrain dtypes to MPI datatypes. Internal to the MPI backend.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "kernels/tensor.h"
#include "parallel/comm/communicator.h"

namespace ustrain::mpi_detail {

// For moving elements: an unsigned type of the dtype's width (the bits travel unchanged).
MPI_Datatype transfer_type(DType t);
// For reductions: MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, or the bf16 / fp16 bits with the engine's
// own sum operation for them.
MPI_Datatype reduce_type(DType t);
struct HalfSumOps {
  MPI_Op bf16 = MPI_OP_NULL, f16 = MPI_OP_NULL;
};
// The sums of bf16 and fp16 bits (widened, added, rounded once): after MPI_Init, and freed
// before MPI_Finalize.
HalfSumOps create_half_sum_ops();
void free_half_sum_ops(HalfSumOps& ops);
MPI_Op reduce_operation(DType t, const HalfSumOps& half);
// MPI counts are ints; asserts that n fits.
int mpi_count(std::int64_t n, const char* op);
// Applies avg after a sum: data[i] /= divisor (f32, or bf16 / fp16 rounded).
void divide_in_place(const Tensor& data, int divisor);

}  // namespace ustrain::mpi_detail
