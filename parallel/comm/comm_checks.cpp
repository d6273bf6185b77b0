#include "parallel/comm/comm_checks.h"

#include <fmt/format.h>

namespace ustrain::comm_checks {

void check_tensor(const Communicator& comm, const Tensor& t, const char* op) {
  USTRAIN_ASSERT(t.device == comm.device(),
                 fmt::format("{} on {}: a {} tensor given to a {} communicator", op, comm.name(),
                             device_name(t.device), device_name(comm.device())));
  USTRAIN_ASSERT(!t.empty() || t.numel() == 0, fmt::format("{} on {}: null tensor data", op, comm.name()));
}

void check_reducible(DType dtype, ReduceOp op, const char* op_name) {
  USTRAIN_ASSERT(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::i32 ||
                     dtype == DType::f64,
                 fmt::format("{} reduces f32, f64, bf16, f16 and i32 tensors, not {}", op_name, dtype_name(dtype)));
  USTRAIN_ASSERT(op != ReduceOp::avg || dtype != DType::i32,
                 fmt::format("{} with avg needs a floating-point tensor, not i32", op_name));
}

bool check_sharded(const Communicator& comm, const Tensor& shard, const Tensor& full, const char* op) {
  check_tensor(comm, shard, op);
  check_tensor(comm, full, op);
  USTRAIN_ASSERT(shard.dtype == full.dtype, fmt::format("{}: shard is {}, full buffer is {}", op,
                                                        dtype_name(shard.dtype), dtype_name(full.dtype)));
  USTRAIN_ASSERT(full.numel() == shard.numel() * comm.size(),
                 fmt::format("{} on {}: the full buffer has {} elements, not {} shards of {} (pad it: "
                             "ShardLayout)",
                             op, comm.name(), full.numel(), comm.size(), shard.numel()));
  const auto* mine = static_cast<const char*>(full.data) + shard.bytes() * static_cast<std::size_t>(comm.rank());
  const bool in_place = shard.data == mine;
  USTRAIN_ASSERT(in_place || !overlaps(shard, full),
                 fmt::format("{}: shard overlaps the full buffer but is not this rank's shard of it", op));
  return in_place;
}

void check_member(const Communicator& comm, int member, const char* what, const char* op) {
  USTRAIN_ASSERT(member >= 0 && member < comm.size(),
                 fmt::format("{} on {}: {} {} is not a member index (0..{})", op, comm.name(), what, member,
                             comm.size() - 1));
}

std::int64_t check_counts(const Communicator& comm, std::span<const std::int64_t> counts, std::int64_t capacity,
                          const char* which, const char* op) {
  USTRAIN_ASSERT(counts.size() == static_cast<std::size_t>(comm.size()),
                 fmt::format("{} on {}: {} has {} entries for {} members", op, comm.name(), which, counts.size(),
                             comm.size()));
  std::int64_t total = 0;
  for (std::int64_t c : counts) {
    USTRAIN_ASSERT(c >= 0, fmt::format("{}: negative count in {}", op, which));
    total += c;
  }
  USTRAIN_ASSERT(total <= capacity, fmt::format("{} on {}: {} add up to {} elements but the tensor holds {}", op,
                                                comm.name(), which, total, capacity));
  return total;
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data);
  const auto* b0 = static_cast<const char*>(b.data);
  return a.bytes() > 0 && b.bytes() > 0 && a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

}  // namespace ustrain::comm_checks
