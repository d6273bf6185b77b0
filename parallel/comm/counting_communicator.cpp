#include "parallel/comm/counting_communicator.h"

#include <fmt/format.h>

#include <algorithm>

#include "parallel/comm/comm_checks.h"

namespace ustrain {

CountingCommunicator::CountingCommunicator(std::vector<int> ranks, int rank, const std::string& label, Device device)
    : ranks_(std::move(ranks)), rank_(rank), name_(describe_group(label, ranks_)), device_(device) {
  USTRAIN_ASSERT(rank_ >= 0 && rank_ < size(), fmt::format("member {} of {}", rank_, name_));
}

Work CountingCommunicator::do_all_reduce(Tensor data, ReduceOp op) {
  comm_checks::check_tensor(*this, data, "all_reduce");
  comm_checks::check_reducible(data.dtype, op, "all_reduce");
  return Work();
}

Work CountingCommunicator::do_reduce_scatter(Tensor shard, Tensor full, ReduceOp op) {
  comm_checks::check_sharded(*this, shard, full, "reduce_scatter");
  comm_checks::check_reducible(full.dtype, op, "reduce_scatter");
  return Work();
}

Work CountingCommunicator::do_all_gather(Tensor full, Tensor shard) {
  comm_checks::check_sharded(*this, shard, full, "all_gather");
  return Work();
}

Work CountingCommunicator::do_all_to_all(Tensor out, Tensor in) {
  comm_checks::check_tensor(*this, out, "all_to_all");
  comm_checks::check_tensor(*this, in, "all_to_all");
  USTRAIN_ASSERT(out.dtype == in.dtype && out.numel() == in.numel() && in.numel() % size() == 0,
                 "all_to_all: in and out must hold size() equal chunks of one dtype");
  return Work();
}

Work CountingCommunicator::do_all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                                           std::span<const std::int64_t> in_counts) {
  comm_checks::check_tensor(*this, out, "all_to_all_v");
  comm_checks::check_tensor(*this, in, "all_to_all_v");
  USTRAIN_ASSERT(out.dtype == in.dtype, "all_to_all_v: in and out need the same dtype");
  comm_checks::check_counts(*this, in_counts, in.numel(), "in_counts", "all_to_all_v");
  comm_checks::check_counts(*this, out_counts, out.numel(), "out_counts", "all_to_all_v");
  return Work();
}

Work CountingCommunicator::do_broadcast(Tensor data, int root) {
  comm_checks::check_tensor(*this, data, "broadcast");
  comm_checks::check_member(*this, root, "root", "broadcast");
  return Work();
}

Work CountingCommunicator::do_send(Tensor data, int peer, int tag) {
  comm_checks::check_tensor(*this, data, "send");
  comm_checks::check_member(*this, peer, "peer", "send");
  USTRAIN_ASSERT(tag >= 0 && tag <= 32767, "send: tags are 0..32767 (the least MPI guarantees)");
  return Work();
}

Work CountingCommunicator::do_recv(Tensor data, int peer, int tag) {
  comm_checks::check_tensor(*this, data, "recv");
  comm_checks::check_member(*this, peer, "peer", "recv");
  USTRAIN_ASSERT(tag >= 0 && tag <= 32767, "recv: tags are 0..32767 (the least MPI guarantees)");
  return Work();
}

std::vector<Work> CountingCommunicator::do_exchange(std::span<const PeerTransfer> transfers) {
  for (const PeerTransfer& t : transfers) {
    const char* op = t.kind == PeerTransfer::Kind::send ? "exchange (send)" : "exchange (recv)";
    comm_checks::check_tensor(*this, t.data, op);
    comm_checks::check_member(*this, t.peer, "peer", op);
    USTRAIN_ASSERT(t.tag >= 0 && t.tag <= 32767, "exchange: tags are 0..32767 (the least MPI guarantees)");
  }
  return std::vector<Work>(transfers.size());
}

}  // namespace ustrain
