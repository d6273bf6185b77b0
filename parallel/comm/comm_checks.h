// Argument checks shared by the communicator backends. A violation is a programming error
// in the caller (an assert), not something a user can fix.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/tensor.h"
#include "parallel/comm/communicator.h"

namespace ustrain::comm_checks {

// The tensor lives on the communicator's device and is not empty unless it has no elements.
void check_tensor(const Communicator& comm, const Tensor& t, const char* op);
// The dtype can be reduced with `op`: f32, f64, bf16, f16 and i32 (MPI sums the 16-bit types
// with operations of its engine, NCCL natively).
void check_reducible(DType dtype, ReduceOp op, const char* op_name);
// full has size() * shard elements of shard's dtype; true when `shard` is exactly this
// rank's shard of `full` (the in-place form).
bool check_sharded(const Communicator& comm, const Tensor& shard, const Tensor& full, const char* op);
void check_member(const Communicator& comm, int member, const char* what, const char* op);
// One count per member, each >= 0, summing to at most `capacity`; returns the sum.
std::int64_t check_counts(const Communicator& comm, std::span<const std::int64_t> counts, std::int64_t capacity,
                          const char* which, const char* op);
// The byte ranges of two tensors overlap.
bool overlaps(const Tensor& a, const Tensor& b);

}  // namespace ustrain::comm_checks
