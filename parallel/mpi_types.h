// Mapping ustrain dtypes to MPI datatypes. Internal to the MPI backend.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "kernels/tensor.h"
#include "parallel/communicator.h"

namespace ustrain::mpi_detail {

// For moving elements: an unsigned type of the dtype's width (the bits travel unchanged).
MPI_Datatype transfer_type(DType t);
// For reductions: MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, or the bf16 bits with `bf16_sum` as the
// operation.
MPI_Datatype reduce_type(DType t);
MPI_Op reduce_operation(DType t, MPI_Op bf16_sum);
// MPI counts are ints; asserts that n fits.
int mpi_count(std::int64_t n, const char* op);
// Applies avg after a sum: data[i] /= divisor (f32, or bf16 rounded).
void divide_in_place(const Tensor& data, int divisor);

}  // namespace ustrain::mpi_detail
