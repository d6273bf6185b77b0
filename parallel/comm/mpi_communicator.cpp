#include "parallel/comm/mpi_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "parallel/comm/comm_checks.h"
#include "parallel/comm/mpi_engine.h"
#include "parallel/comm/mpi_types.h"

namespace ustrain {

namespace mpi_detail {
// The group's MPI communicator. Only the progress thread reads or writes it.
struct Handle {
  MPI_Comm comm = MPI_COMM_NULL;
};
}  // namespace mpi_detail

using namespace mpi_detail;
using comm_checks::check_tensor;

namespace {

std::string sized(const char* op, const Tensor& t) {
  return fmt::format("{} of {} {}", op, t.numel(), dtype_name(t.dtype));
}

}  // namespace

MpiCommunicator::MpiCommunicator(Engine& engine, std::vector<int> ranks, int global_rank, const std::string& label,
                                 CommOptions options)
    : engine_(engine),
      ranks_(std::move(ranks)),
      name_(describe_group(label, ranks_)),
      options_(options),
      group_(std::make_shared<Group>(name_, global_rank, ranks_)),
      handle_(std::make_shared<Handle>()) {
  engine_.add_group(group_);
  const auto me = std::find(ranks_.begin(), ranks_.end(), global_rank);
  USTRAIN_ASSERT(me != ranks_.end(), fmt::format("rank {} is not a member of {}", global_rank, name_));
  rank_ = static_cast<int>(me - ranks_.begin());
  // MPI_Comm_create_group blocks; it runs on the progress thread, and wait()'s own deadline
  // turns a member that never arrives into a CommError.
  submit("creating the communicator", [world = engine_.world(), ranks = ranks_, handle = handle_](
                                          MPI_Comm, std::vector<MPI_Request>&) {
    MPI_Group world_group = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
    MPI_Comm_group(world, &world_group);
    MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &members);
    const int rc = MPI_Comm_create_group(world, members, /*tag=*/0, &handle->comm);
    MPI_Group_free(&members);
    MPI_Group_free(&world_group);
    if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(handle->comm, MPI_ERRORS_RETURN);
    return rc;
  }).wait();
}

MpiCommunicator::~MpiCommunicator() {
  // After a failure the communicator may still have requests in MPI: leave it alone.
  if (!group_->failure().empty()) return;
  submit("freeing the communicator", [handle = handle_](MPI_Comm, std::vector<MPI_Request>&) {
    return MPI_Comm_free(&handle->comm);
  });
}

template <class Start>
Work MpiCommunicator::submit(std::string what, Start start, std::function<void()> finish, mpi_detail::Channel channel) {
  Operation op;
  if (channel.point_to_point()) channel.peer = ranks()[static_cast<std::size_t>(channel.peer)];
  op.channel = channel;
  op.what = std::move(what);
  op.group = group_;
  op.timeout = options_.timeout;
  op.patience = options_.patience;
  op.timeout_setting = options_.timeout_setting;
  op.start = [handle = handle_, start = std::move(start)](std::vector<MPI_Request>& requests) {
    return start(handle->comm, requests);
  };
  op.finish = std::move(finish);
  return engine_.submit(std::move(op));
}

Work MpiCommunicator::do_all_reduce(Tensor data, ReduceOp op) {
  check_tensor(*this, data, "all_reduce");
  comm_checks::check_reducible(data.dtype, op, "all_reduce");
  const int count = mpi_count(data.numel(), "all_reduce");
  const MPI_Datatype type = reduce_type(data.dtype);
  const MPI_Op mpi_op = reduce_operation(data.dtype, engine_.half_sums());
  std::function<void()> finish;
  if (op == ReduceOp::avg) finish = [data, n = size()] { divide_in_place(data, n); };
  return submit(
      fmt::format("collective all_reduce of {} {} ({})", data.numel(), dtype_name(data.dtype), reduce_op_name(op)),
      [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
        r.resize(1);
        return MPI_Iallreduce(MPI_IN_PLACE, data.data, count, type, mpi_op, comm, r.data());
      },
      std::move(finish));
}

Work MpiCommunicator::do_reduce_scatter(Tensor shard, Tensor full, ReduceOp op) {
  const bool in_place = comm_checks::check_sharded(*this, shard, full, "reduce_scatter");
  comm_checks::check_reducible(full.dtype, op, "reduce_scatter");
  const int count = mpi_count(shard.numel(), "reduce_scatter");
  const MPI_Datatype type = reduce_type(full.dtype);
  const MPI_Op mpi_op = reduce_operation(full.dtype, engine_.half_sums());
  // In place, MPI leaves this rank's result at the start of `full`: move it to its shard.
  auto finish = [=, n = size()] {
    if (in_place && shard.data != full.data) std::memmove(shard.data, full.data, shard.bytes());
    if (op == ReduceOp::avg) divide_in_place(shard, n);
  };
  return submit(
      fmt::format("collective reduce_scatter of {} {} ({})", full.numel(), dtype_name(full.dtype), reduce_op_name(op)),
      [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
        r.resize(1);
        return MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : full.data, in_place ? full.data : shard.data, count,
                                         type, mpi_op, comm, r.data());
      },
      finish);
}

Work MpiCommunicator::do_all_gather(Tensor full, Tensor shard) {
  const bool in_place = comm_checks::check_sharded(*this, shard, full, "all_gather");
  const int count = mpi_count(shard.numel(), "all_gather");
  const MPI_Datatype type = transfer_type(full.dtype);
  return submit(sized("collective all_gather", full), [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
    r.resize(1);
    if (in_place) return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full.data, count, type, comm, r.data());
    return MPI_Iallgather(shard.data, count, type, full.data, count, type, comm, r.data());
  });
}

Work MpiCommunicator::do_all_to_all(Tensor out, Tensor in) {
  check_tensor(*this, out, "all_to_all");
  check_tensor(*this, in, "all_to_all");
  USTRAIN_ASSERT(out.dtype == in.dtype && out.numel() == in.numel() && in.numel() % size() == 0,
                 fmt::format("all_to_all on {}: in and out need the same dtype and a multiple of {} elements "
                             "(in {} {}, out {} {})",
                             name_, size(), in.numel(), dtype_name(in.dtype), out.numel(), dtype_name(out.dtype)));
  USTRAIN_ASSERT(!comm_checks::overlaps(in, out), "all_to_all: in and out overlap");
  const int chunk = mpi_count(in.numel() / size(), "all_to_all");
  const MPI_Datatype type = transfer_type(in.dtype);
  return submit(sized("collective all_to_all", in), [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
    r.resize(1);
    return MPI_Ialltoall(in.data, chunk, type, out.data, chunk, type, comm, r.data());
  });
}

Work MpiCommunicator::do_all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                                   std::span<const std::int64_t> in_counts) {
  check_tensor(*this, out, "all_to_all_v");
  check_tensor(*this, in, "all_to_all_v");
  USTRAIN_ASSERT(out.dtype == in.dtype, "all_to_all_v: in and out need the same dtype");
  USTRAIN_ASSERT(!comm_checks::overlaps(in, out), "all_to_all_v: in and out overlap");
  comm_checks::check_counts(*this, in_counts, in.numel(), "in_counts", "all_to_all_v");
  comm_checks::check_counts(*this, out_counts, out.numel(), "out_counts", "all_to_all_v");
  // MPI reads the count and displacement arrays until the operation completes: they live
  // in the operation.
  struct Layout {
    std::vector<int> in_counts, in_displs, out_counts, out_displs;
  };
  auto layout = std::make_shared<Layout>();
  const auto fill = [](std::span<const std::int64_t> counts, std::vector<int>& c, std::vector<int>& d) {
    std::int64_t offset = 0;
    for (std::int64_t n : counts) {
      c.push_back(mpi_count(n, "all_to_all_v"));
      d.push_back(mpi_count(offset, "all_to_all_v"));
      offset += n;
    }
  };
  fill(in_counts, layout->in_counts, layout->in_displs);
  fill(out_counts, layout->out_counts, layout->out_displs);
  const MPI_Datatype type = transfer_type(in.dtype);
  return submit(sized("collective all_to_all_v", in), [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
    r.resize(1);
    return MPI_Ialltoallv(in.data, layout->in_counts.data(), layout->in_displs.data(), type, out.data,
                          layout->out_counts.data(), layout->out_displs.data(), type, comm, r.data());
  });
}

Work MpiCommunicator::do_broadcast(Tensor data, int root) {
  check_tensor(*this, data, "broadcast");
  comm_checks::check_member(*this, root, "root", "broadcast");
  const int count = mpi_count(data.numel(), "broadcast");
  const MPI_Datatype type = transfer_type(data.dtype);
  return submit(fmt::format("collective broadcast of {} {} from member {}", data.numel(), dtype_name(data.dtype), root),
                [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
                  r.resize(1);
                  return MPI_Ibcast(data.data, count, type, root, comm, r.data());
                });
}

Work MpiCommunicator::do_send(Tensor data, int peer, int tag) {
  check_tensor(*this, data, "send");
  comm_checks::check_member(*this, peer, "peer", "send");
  USTRAIN_ASSERT(tag >= 0 && tag <= 32767, "send: tags are 0..32767 (the least MPI guarantees)");
  const int count = mpi_count(data.numel(), "send");
  const MPI_Datatype type = transfer_type(data.dtype);
  return submit(fmt::format("send of {} {} to member {} (tag {})", data.numel(), dtype_name(data.dtype), peer, tag),
                [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
                  r.resize(1);
                  return MPI_Isend(data.data, count, type, peer, tag, comm, r.data());
                },
                {}, {mpi_detail::Channel::send, peer, tag});
}

Work MpiCommunicator::do_recv(Tensor data, int peer, int tag) {
  check_tensor(*this, data, "recv");
  comm_checks::check_member(*this, peer, "peer", "recv");
  USTRAIN_ASSERT(tag >= 0 && tag <= 32767, "recv: tags are 0..32767 (the least MPI guarantees)");
  const int count = mpi_count(data.numel(), "recv");
  const MPI_Datatype type = transfer_type(data.dtype);
  return submit(fmt::format("recv of {} {} from member {} (tag {})", data.numel(), dtype_name(data.dtype), peer, tag),
                [=](MPI_Comm comm, std::vector<MPI_Request>& r) {
                  r.resize(1);
                  return MPI_Irecv(data.data, count, type, peer, tag, comm, r.data());
                },
                {}, {mpi_detail::Channel::receive, peer, tag});
}

std::vector<Work> MpiCommunicator::do_exchange(std::span<const PeerTransfer> transfers) {
  for (const PeerTransfer& t : transfers) {
    const char* op = t.kind == PeerTransfer::Kind::send ? "exchange (send)" : "exchange (recv)";
    check_tensor(*this, t.data, op);
    comm_checks::check_member(*this, t.peer, "peer", op);
    USTRAIN_ASSERT(t.tag >= 0 && t.tag <= 32767, "exchange: tags are 0..32767 (the least MPI guarantees)");
  }
  // Each transfer is its own non-blocking request: all are posted, in order, before any is
  // waited for, and each completes on its own.
  std::vector<Work> works;
  for (const PeerTransfer& t : transfers)
    works.push_back(t.kind == PeerTransfer::Kind::send ? do_send(t.data, t.peer, t.tag) : do_recv(t.data, t.peer, t.tag));
  return works;
}

Work MpiCommunicator::do_barrier() {
  return submit("collective barrier", [](MPI_Comm comm, std::vector<MPI_Request>& r) {
    r.resize(1);
    return MPI_Ibarrier(comm, r.data());
  });
}

}  // namespace ustrain
