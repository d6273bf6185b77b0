#include "parallel/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "parallel/comm/comm_checks.h"

namespace ustrain {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::microseconds(20);

ncclDataType_t reduce_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    default: break;
  }
  USTRAIN_ASSERT(false, fmt::format("the NCCL backend does not reduce {}", dtype_name(t)));
}

ncclRedOp_t reduce_operation(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclAvg; }

char* at(const Tensor& t, std::int64_t elements) {
  return static_cast<char*>(t.data) + static_cast<std::size_t>(elements) * dtype_size(t.dtype);
}

// The payload member 0 broadcasts: whether it made an id, and the id.
struct Bootstrap {
  std::int32_t ok = 0;
  ncclUniqueId id{};
};
static_assert(sizeof(Bootstrap) % 4 == 0, "broadcast as i32 words");

}  // namespace

struct NcclCommunicator::Shared {
  Shared(std::string n, int r) : name(std::move(n)), global_rank(r) {}
  ncclComm_t comm = nullptr;
  const std::string name;
  const int global_rank;

  std::string failure() {
    std::lock_guard lock(mutex_);
    return failure_;
  }
  // Records the first failure and aborts the NCCL communicator, which also releases
  // kernels waiting for a dead peer. Returns the message to throw.
  std::string fail(const std::string& message) {
    std::lock_guard lock(mutex_);
    if (failure_.empty()) {
      failure_ = message;
      if (comm) ncclCommAbort(comm);
      comm = nullptr;
    }
    return message;
  }
  std::string nccl_error(const std::string& what, ncclResult_t r) {
    const char* detail = comm ? ncclGetLastError(comm) : "";
    return fmt::format("{} on {} failed on rank {}: {}{}{}", what, name, global_rank, ncclGetErrorString(r),
                       detail && *detail ? ": " : "", detail ? detail : "");
  }
  // A nonblocking communicator may answer ncclInProgress: poll until it settles.
  ncclResult_t settle(ncclResult_t r, Clock::time_point deadline, bool& timed_out) {
    timed_out = false;
    while (r == ncclInProgress && comm) {
      if (Clock::now() > deadline) {
        timed_out = true;
        return r;
      }
      std::this_thread::sleep_for(kPollInterval);
      ncclCommGetAsyncError(comm, &r);
    }
    return r;
  }

 private:
  std::mutex mutex_;
  std::string failure_;
};

namespace {

// The Work state of one NCCL operation: a CUDA event recorded after it.
class NcclWork final : public WorkState {
 public:
  NcclWork(std::shared_ptr<NcclCommunicator::Shared> shared, cudaEvent_t done, cudaStream_t compute, std::string what,
           Clock::time_point deadline, std::chrono::milliseconds timeout)
      : shared_(std::move(shared)),
        done_(done),
        compute_(compute),
        what_(std::move(what)),
        deadline_(deadline),
        timeout_(timeout) {}
  ~NcclWork() override { cudaEventDestroy(done_); }

  void wait() override {
    while (!test()) std::this_thread::sleep_for(kPollInterval);
  }

  // The compute stream waits for the event on the GPU; the host goes on at once. A failure
  // or a passed deadline is then found by the next wait() on this communicator's work.
  void join_compute() override {
    if (completed_) return;
    if (const std::string f = shared_->failure(); !f.empty())
      throw CommError(fmt::format("{} on {} did not complete: the group failed: {}", what_, shared_->name, f));
    const cudaError_t e = cudaStreamWaitEvent(compute_, done_, 0);
    if (e != cudaSuccess)
      throw CommError(shared_->fail(fmt::format("{} on {} failed on rank {}: CUDA error {}", what_, shared_->name,
                                                shared_->global_rank, cudaGetErrorString(e))));
  }

  bool test() override {
    if (completed_) return true;
    if (const std::string f = shared_->failure(); !f.empty())
      throw CommError(fmt::format("{} on {} did not complete: the group failed: {}", what_, shared_->name, f));
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) return completed_ = true;
    if (e != cudaErrorNotReady)
      throw CommError(shared_->fail(fmt::format("{} on {} failed on rank {}: CUDA error {}", what_, shared_->name,
                                                shared_->global_rank, cudaGetErrorString(e))));
    ncclResult_t async = ncclSuccess;
    if (shared_->comm) ncclCommGetAsyncError(shared_->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) throw CommError(shared_->fail(shared_->nccl_error(what_, async)));
    if (Clock::now() > deadline_)
      throw CommError(shared_->fail(timeout_message(what_, shared_->name, shared_->global_rank, timeout_)));
    return false;
  }

 private:
  std::shared_ptr<NcclCommunicator::Shared> shared_;
  cudaEvent_t done_;
  cudaStream_t compute_;
  const std::string what_;
  const Clock::time_point deadline_;
  const std::chrono::milliseconds timeout_;
  bool completed_ = false;
};

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, const std::string& label, int cuda_device,
                                   CommOptions options, CUstream_st* compute_stream)
    : ranks_(bootstrap.ranks()),
      rank_(bootstrap.rank()),
      cuda_device_(cuda_device),
      options_(options),
      compute_stream_(compute_stream) {
  USTRAIN_ASSERT(bootstrap.device() == Device::cpu, "the NCCL bootstrap communicator must be a host communicator");
  shared_ = std::make_shared<Shared>(describe_group(label, ranks_), ranks_[static_cast<std::size_t>(rank_)]);
  const std::string& group = shared_->name;

  // Every member learns whether every member can use its GPU, so that all stop together.
  const cudaError_t device_error = cudaSetDevice(cuda_device);
  std::int32_t unusable = device_error == cudaSuccess ? 0 : 1;
  bootstrap.all_reduce(Tensor(&unusable, Shape{1}, DType::i32)).wait();
  if (device_error != cudaSuccess)
    throw UserError(fmt::format("rank {} cannot use CUDA device {} for the {}: {}; check the driver and the GPUs "
                                "visible to each rank (CUDA_VISIBLE_DEVICES)",
                                shared_->global_rank, cuda_device, group, cudaGetErrorString(device_error)));
  if (unusable > 0)
    throw UserError(fmt::format("{} member(s) of the {} cannot use their CUDA device; see their errors", unusable,
                                group));

  Bootstrap payload;
  if (rank_ == 0) payload.ok = ncclGetUniqueId(&payload.id) == ncclSuccess ? 1 : 0;
  bootstrap.broadcast(Tensor(&payload, Shape{sizeof(Bootstrap) / 4}, DType::i32), 0).wait();
  if (!payload.ok) throw UserError(fmt::format("NCCL could not create a unique id for the {} on its first member", group));

  const Clock::time_point deadline = Clock::now() + options_.timeout;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that joining can be abandoned at the deadline
  ncclResult_t r = ncclCommInitRankConfig(&shared_->comm, size(), payload.id, rank_, &config);
  bool timed_out = false;
  r = shared_->settle(r, deadline, timed_out);
  if (timed_out)
    throw CommError(shared_->fail(timeout_message("creating the NCCL communicator", group, shared_->global_rank,
                                                  options_.timeout)));
  if (r != ncclSuccess) throw CommError(shared_->fail(shared_->nccl_error("creating the NCCL communicator", r)));

  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  stream_ = stream;
  if (e == cudaSuccess) e = cudaMalloc(&scratch_, sizeof(std::int32_t));
  if (e != cudaSuccess) {
    const std::string message = fmt::format("setting up the {} on CUDA device {}: {}", group, cuda_device,
                                            cudaGetErrorString(e));
    shared_->fail(message);
    if (stream_) cudaStreamDestroy(stream_);
    throw UserError(message);
  }
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(cuda_device_);
  if (shared_->failure().empty() && shared_->comm) {
    // Let the queued operations finish within the deadline, then leave cleanly; a peer that
    // never arrives makes this an abort instead of a hang.
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    while (cudaStreamQuery(stream_) == cudaErrorNotReady && Clock::now() < deadline)
      std::this_thread::sleep_for(kPollInterval);
    bool timed_out = cudaStreamQuery(stream_) == cudaErrorNotReady;
    ncclResult_t r = timed_out ? ncclInProgress : shared_->settle(ncclCommFinalize(shared_->comm), deadline, timed_out);
    if (timed_out || r != ncclSuccess) {
      shared_->fail("the communicator was destroyed with operations that did not complete");
    } else {
      ncclCommDestroy(shared_->comm);
      shared_->comm = nullptr;
    }
  }
  if (stream_) cudaStreamDestroy(stream_);
  if (scratch_) cudaFree(scratch_);
}

const std::string& NcclCommunicator::name() const { return shared_->name; }

template <class Enqueue>
Work NcclCommunicator::launch(std::string what, Enqueue enqueue) {
  if (const std::string f = shared_->failure(); !f.empty())
    return Work::failed(fmt::format("{} on {} was not started: the group failed earlier: {}", what, shared_->name, f));
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  const auto cuda_failure = [&](cudaError_t e) {
    return Work::failed(shared_->fail(fmt::format("{} on {} failed on rank {}: CUDA error {}", what, shared_->name,
                                                  shared_->global_rank, cudaGetErrorString(e))));
  };
  cudaSetDevice(cuda_device_);
  // The communication stream waits (on the GPU) for what the compute stream queued so far.
  cudaEvent_t ready = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(ready, compute_stream_);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(stream_, ready, 0);
  if (ready) cudaEventDestroy(ready);  // released once the wait is satisfied
  if (e != cudaSuccess) return cuda_failure(e);

  bool timed_out = false;
  const ncclResult_t r = shared_->settle(enqueue(shared_->comm, stream_), deadline, timed_out);
  if (timed_out)
    return Work::failed(shared_->fail(timeout_message(what, shared_->name, shared_->global_rank, options_.timeout)));
  if (r != ncclSuccess) return Work::failed(shared_->fail(shared_->nccl_error(what, r)));

  cudaEvent_t done = nullptr;
  e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(done, stream_);
  if (e != cudaSuccess) {
    if (done) cudaEventDestroy(done);
    return cuda_failure(e);
  }
  return Work(std::make_shared<NcclWork>(shared_, done, compute_stream_, std::move(what), deadline, options_.timeout));
}

Work NcclCommunicator::do_all_reduce(Tensor data, ReduceOp op) {
  comm_checks::check_tensor(*this, data, "all_reduce");
  comm_checks::check_reducible(data.dtype, op, "all_reduce");
  return launch(fmt::format("collective all_reduce of {} {} ({})", data.numel(), dtype_name(data.dtype),
                            reduce_op_name(op)),
                [=](ncclComm_t comm, cudaStream_t s) {
                  return ncclAllReduce(data.data, data.data, static_cast<std::size_t>(data.numel()),
                                       reduce_type(data.dtype), reduce_operation(op), comm, s);
                });
}

Work NcclCommunicator::do_reduce_scatter(Tensor shard, Tensor full, ReduceOp op) {
  comm_checks::check_sharded(*this, shard, full, "reduce_scatter");  // NCCL takes both forms as they are
  comm_checks::check_reducible(full.dtype, op, "reduce_scatter");
  return launch(fmt::format("collective reduce_scatter of {} {} ({})", full.numel(), dtype_name(full.dtype),
                            reduce_op_name(op)),
                [=](ncclComm_t comm, cudaStream_t s) {
                  return ncclReduceScatter(full.data, shard.data, static_cast<std::size_t>(shard.numel()),
                                           reduce_type(full.dtype), reduce_operation(op), comm, s);
                });
}

Work NcclCommunicator::do_all_gather(Tensor full, Tensor shard) {
  comm_checks::check_sharded(*this, shard, full, "all_gather");
  return launch(fmt::format("collective all_gather of {} {}", full.numel(), dtype_name(full.dtype)),
                [=](ncclComm_t comm, cudaStream_t s) {
                  return ncclAllGather(shard.data, full.data, shard.bytes(), ncclUint8, comm, s);
                });
}

Work NcclCommunicator::do_all_to_all(Tensor out, Tensor in) {
  comm_checks::check_tensor(*this, out, "all_to_all");
  comm_checks::check_tensor(*this, in, "all_to_all");
  USTRAIN_ASSERT(out.dtype == in.dtype && out.numel() == in.numel() && in.numel() % size() == 0,
                 fmt::format("all_to_all on {}: in and out need the same dtype and a multiple of {} elements",
                             name(), size()));
  USTRAIN_ASSERT(!comm_checks::overlaps(in, out), "all_to_all: in and out overlap");
  const std::vector<std::int64_t> counts(static_cast<std::size_t>(size()), in.numel() / size());
  return do_all_to_all_v(out, counts, in, counts);  // counted once, by all_to_all
}

Work NcclCommunicator::do_all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                                    std::span<const std::int64_t> in_counts) {
  comm_checks::check_tensor(*this, out, "all_to_all_v");
  comm_checks::check_tensor(*this, in, "all_to_all_v");
  USTRAIN_ASSERT(out.dtype == in.dtype, "all_to_all_v: in and out need the same dtype");
  USTRAIN_ASSERT(!comm_checks::overlaps(in, out), "all_to_all_v: in and out overlap");
  comm_checks::check_counts(*this, in_counts, in.numel(), "in_counts", "all_to_all_v");
  comm_checks::check_counts(*this, out_counts, out.numel(), "out_counts", "all_to_all_v");
  const std::vector<std::int64_t> sends(in_counts.begin(), in_counts.end());
  const std::vector<std::int64_t> receives(out_counts.begin(), out_counts.end());
  const std::size_t element = dtype_size(in.dtype);
  return launch(fmt::format("collective all_to_all of {} {}", in.numel(), dtype_name(in.dtype)),
                [=, n = size()](ncclComm_t comm, cudaStream_t s) {
                  ncclGroupStart();
                  std::int64_t sent = 0, received = 0;
                  for (int j = 0; j < n; ++j) {
                    const auto to = sends[static_cast<std::size_t>(j)], from = receives[static_cast<std::size_t>(j)];
                    if (to > 0) ncclSend(at(in, sent), static_cast<std::size_t>(to) * element, ncclUint8, j, comm, s);
                    if (from > 0)
                      ncclRecv(at(out, received), static_cast<std::size_t>(from) * element, ncclUint8, j, comm, s);
                    sent += to;
                    received += from;
                  }
                  return ncclGroupEnd();
                });
}

Work NcclCommunicator::do_broadcast(Tensor data, int root) {
  comm_checks::check_tensor(*this, data, "broadcast");
  comm_checks::check_member(*this, root, "root", "broadcast");
  return launch(fmt::format("collective broadcast of {} {} from member {}", data.numel(), dtype_name(data.dtype), root),
                [=](ncclComm_t comm, cudaStream_t s) {
                  return ncclBroadcast(data.data, data.data, data.bytes(), ncclUint8, root, comm, s);
                });
}

Work NcclCommunicator::do_send(Tensor data, int peer, int tag) {
  comm_checks::check_tensor(*this, data, "send");
  comm_checks::check_member(*this, peer, "peer", "send");
  return launch(fmt::format("send of {} {} to member {} (tag {})", data.numel(), dtype_name(data.dtype), peer, tag),
                [=](ncclComm_t comm, cudaStream_t s) { return ncclSend(data.data, data.bytes(), ncclUint8, peer, comm, s); });
}

Work NcclCommunicator::do_recv(Tensor data, int peer, int tag) {
  comm_checks::check_tensor(*this, data, "recv");
  comm_checks::check_member(*this, peer, "peer", "recv");
  return launch(fmt::format("recv of {} {} from member {} (tag {})", data.numel(), dtype_name(data.dtype), peer, tag),
                [=](ncclComm_t comm, cudaStream_t s) { return ncclRecv(data.data, data.bytes(), ncclUint8, peer, comm, s); });
}

std::vector<Work> NcclCommunicator::do_exchange(std::span<const PeerTransfer> transfers) {
  for (const PeerTransfer& t : transfers) {
    comm_checks::check_tensor(*this, t.data, "exchange");
    comm_checks::check_member(*this, t.peer, "peer", "exchange");
  }
  const std::vector<PeerTransfer> batch(transfers.begin(), transfers.end());
  // One group call: NCCL starts every send and receive together, whatever their order, and
  // completes them together.
  const Work work = launch(fmt::format("exchange of {} transfers", batch.size()), [batch](ncclComm_t comm, cudaStream_t s) {
    ncclGroupStart();
    for (const PeerTransfer& t : batch) {
      if (t.kind == PeerTransfer::Kind::send)
        ncclSend(t.data.data, t.data.bytes(), ncclUint8, t.peer, comm, s);
      else
        ncclRecv(t.data.data, t.data.bytes(), ncclUint8, t.peer, comm, s);
    }
    return ncclGroupEnd();
  });
  return std::vector<Work>(batch.size(), work);
}

Work NcclCommunicator::do_barrier() {
  // NCCL has no barrier: a one-element all-reduce that every member must join. Waiting on it
  // holds the host until everyone has arrived.
  return launch("collective barrier", [scratch = scratch_](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(scratch, scratch, 1, ncclInt32, ncclSum, comm, s);
  });
}

}  // namespace ustrain
