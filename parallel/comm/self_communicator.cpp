#include "parallel/comm/self_communicator.h"

#include <fmt/format.h>

#include <cstring>

#include "parallel/comm/comm_checks.h"

namespace ustrain {
namespace {

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

}  // namespace

SelfCommunicator::SelfCommunicator(int global_rank, const std::string& label)
    : ranks_{global_rank}, name_(describe_group(label, ranks_)) {}

Work SelfCommunicator::do_all_reduce(Tensor data, ReduceOp op) {
  comm_checks::check_tensor(*this, data, "all_reduce");
  comm_checks::check_reducible(data.dtype, op, "all_reduce");
  return Work();  // sum and average over one member: the data itself
}

Work SelfCommunicator::do_reduce_scatter(Tensor shard, Tensor full, ReduceOp op) {
  comm_checks::check_sharded(*this, shard, full, "reduce_scatter");
  comm_checks::check_reducible(full.dtype, op, "reduce_scatter");
  copy_bytes(shard.data, full.data, shard.bytes());
  return Work();
}

Work SelfCommunicator::do_all_gather(Tensor full, Tensor shard) {
  comm_checks::check_sharded(*this, shard, full, "all_gather");
  copy_bytes(full.data, shard.data, shard.bytes());
  return Work();
}

Work SelfCommunicator::do_all_to_all(Tensor out, Tensor in) {
  comm_checks::check_tensor(*this, out, "all_to_all");
  comm_checks::check_tensor(*this, in, "all_to_all");
  USTRAIN_ASSERT(out.dtype == in.dtype && out.numel() == in.numel(), "all_to_all: in and out differ in size or dtype");
  copy_bytes(out.data, in.data, in.bytes());
  return Work();
}

Work SelfCommunicator::do_all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                                    std::span<const std::int64_t> in_counts) {
  comm_checks::check_tensor(*this, out, "all_to_all_v");
  comm_checks::check_tensor(*this, in, "all_to_all_v");
  USTRAIN_ASSERT(out.dtype == in.dtype, "all_to_all_v: in and out need the same dtype");
  const std::int64_t sent = comm_checks::check_counts(*this, in_counts, in.numel(), "in_counts", "all_to_all_v");
  comm_checks::check_counts(*this, out_counts, out.numel(), "out_counts", "all_to_all_v");
  USTRAIN_ASSERT(out_counts[0] == sent, "all_to_all_v: a group of one receives what it sends");
  copy_bytes(out.data, in.data, static_cast<std::size_t>(sent) * dtype_size(in.dtype));
  return Work();
}

Work SelfCommunicator::do_broadcast(Tensor data, int root) {
  comm_checks::check_tensor(*this, data, "broadcast");
  comm_checks::check_member(*this, root, "root", "broadcast");
  return Work();
}

Work SelfCommunicator::do_send(Tensor, int peer, int) {
  USTRAIN_ASSERT(false, fmt::format("send to member {} on {}: a group of one has no peer", peer, name_));
}

Work SelfCommunicator::do_recv(Tensor, int peer, int) {
  USTRAIN_ASSERT(false, fmt::format("recv from member {} on {}: a group of one has no peer", peer, name_));
}

std::vector<Work> SelfCommunicator::do_exchange(std::span<const PeerTransfer> transfers) {
  USTRAIN_ASSERT(transfers.empty(), fmt::format("exchange of {} transfers on {}: a group of one has no peer",
                                                transfers.size(), name_));
  return {};
}

}  // namespace ustrain
