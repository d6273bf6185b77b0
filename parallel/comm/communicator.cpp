#include "parallel/comm/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "parallel/comm/comm_trace.h"
#include "parallel/comm/trace.h"

namespace ustrain {

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "avg"; }

ShardLayout::ShardLayout(std::int64_t n, int p) : numel(n), parts(p) {
  USTRAIN_ASSERT(n >= 0 && p >= 1, "shard layout needs numel >= 0 and parts >= 1");
  shard = (n + p - 1) / p;
  padded = shard * p;
}

std::int64_t ShardLayout::real_in(int part) const {
  return std::clamp<std::int64_t>(numel - begin(part), 0, shard);
}

namespace {
class FailedWork final : public WorkState {
 public:
  explicit FailedWork(std::string message) : message_(std::move(message)) {}
  void wait() override { throw CommError(message_); }
  bool test() override { throw CommError(message_); }

 private:
  std::string message_;
};

// Adds the time its waits block to a communicator's count.
class TimedWork final : public WorkState {
 public:
  TimedWork(Work inner, std::shared_ptr<std::atomic<std::int64_t>> blocked_ns)
      : inner_(std::move(inner)), blocked_ns_(std::move(blocked_ns)) {}
  void wait() override {
    const Timed timed(*blocked_ns_);
    inner_.wait();
  }
  bool test() override { return inner_.test(); }
  void join_compute() override {
    const Timed timed(*blocked_ns_);
    inner_.join_compute();
  }

 private:
  // Adds its lifetime to `total`, also when the wait throws.
  struct Timed {
    explicit Timed(std::atomic<std::int64_t>& t) : total(t) {}
    ~Timed() {
      total += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    }
    std::atomic<std::int64_t>& total;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  };

  Work inner_;
  std::shared_ptr<std::atomic<std::int64_t>> blocked_ns_;
};
}  // namespace

Work Work::failed(std::string message) { return Work(std::make_shared<FailedWork>(std::move(message))); }

void wait_all(std::span<Work> works) {
  for (Work& w : works) w.wait();
}

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::all_reduce: return "all_reduce";
    case CommOp::reduce_scatter: return "reduce_scatter";
    case CommOp::all_gather: return "all_gather";
    case CommOp::all_to_all: return "all_to_all";
    case CommOp::broadcast: return "broadcast";
    case CommOp::send: return "send";
    case CommOp::recv: return "recv";
    case CommOp::barrier: return "barrier";
  }
  return "unknown";
}

namespace {
// floor(bytes * k / n) without overflowing for any realistic buffer.
std::int64_t scaled(std::int64_t bytes, std::int64_t k, std::int64_t n) {
  return bytes / n * k + bytes % n * k / n;
}
}  // namespace

std::int64_t wire_bytes(CommOp op, std::int64_t payload_bytes, int members) {
  USTRAIN_ASSERT(payload_bytes >= 0 && members >= 1, "wire_bytes needs payload_bytes >= 0 and members >= 1");
  if (members == 1) return 0;
  const std::int64_t n = members;
  switch (op) {
    case CommOp::all_reduce: return scaled(payload_bytes, 2 * (n - 1), n);
    case CommOp::reduce_scatter:
    case CommOp::all_gather:
    case CommOp::all_to_all: return scaled(payload_bytes, n - 1, n);
    case CommOp::broadcast:
    case CommOp::send: return payload_bytes;
    case CommOp::recv:
    case CommOp::barrier: return 0;
  }
  return 0;
}

OpVolume& OpVolume::operator+=(const OpVolume& o) {
  calls += o.calls;
  payload_bytes += o.payload_bytes;
  wire_bytes += o.wire_bytes;
  return *this;
}

OpVolume& OpVolume::operator-=(const OpVolume& o) {
  calls -= o.calls;
  payload_bytes -= o.payload_bytes;
  wire_bytes -= o.wire_bytes;
  return *this;
}

OpVolume& CommVolume::operator[](CommOp op) {
  return const_cast<OpVolume&>(std::as_const(*this)[op]);
}

const OpVolume& CommVolume::operator[](CommOp op) const {
  switch (op) {
    case CommOp::all_reduce: return all_reduce;
    case CommOp::reduce_scatter: return reduce_scatter;
    case CommOp::all_gather: return all_gather;
    case CommOp::all_to_all: return all_to_all;
    case CommOp::broadcast: return broadcast;
    case CommOp::send: return send;
    case CommOp::recv: return recv;
    case CommOp::barrier: return barrier;
  }
  USTRAIN_ASSERT(false, "CommVolume: unknown operation");
}

OpVolume CommVolume::total() const {
  OpVolume t;
  for (int k = 0; k < kCommOpCount; ++k) t += (*this)[static_cast<CommOp>(k)];
  return t;
}

std::int64_t CommVolume::playbook_bytes() const {
  return 2 * all_reduce.payload_bytes + reduce_scatter.payload_bytes + all_gather.payload_bytes +
         all_to_all.payload_bytes + broadcast.payload_bytes + send.payload_bytes;
}

CommVolume& CommVolume::operator+=(const CommVolume& o) {
  for (int k = 0; k < kCommOpCount; ++k) (*this)[static_cast<CommOp>(k)] += o[static_cast<CommOp>(k)];
  return *this;
}

CommVolume& CommVolume::operator-=(const CommVolume& o) {
  for (int k = 0; k < kCommOpCount; ++k) (*this)[static_cast<CommOp>(k)] -= o[static_cast<CommOp>(k)];
  return *this;
}

std::string CommVolume::summary() const {
  std::string out;
  const auto line = [&out](const char* name, const OpVolume& v) {
    out += fmt::format("{:<15} {:>6} calls  payload {:>10}  wire {:>10}\n", name, v.calls, format_bytes(static_cast<std::size_t>(v.payload_bytes)),
                       format_bytes(static_cast<std::size_t>(v.wire_bytes)));
  };
  for (int k = 0; k < kCommOpCount; ++k) {
    const CommOp op = static_cast<CommOp>(k);
    if ((*this)[op].calls != 0) line(comm_op_name(op), (*this)[op]);
  }
  if (out.empty()) return out;
  line("total", total());
  out += fmt::format("{:<15} {}\n", "playbook", format_bytes(static_cast<std::size_t>(playbook_bytes())));
  return out;
}

void Communicator::count(CommOp op, std::int64_t payload_bytes, std::int64_t wire) {
  OpVolume& v = volume_[op];
  ++v.calls;
  v.payload_bytes += payload_bytes;
  v.wire_bytes += wire;
}

namespace {
std::int64_t bytes_of(const Tensor& t) { return static_cast<std::int64_t>(t.bytes()); }
}  // namespace

// Each operation hands over first and counts once the backend accepted the arguments.
Work Communicator::all_reduce(Tensor data, ReduceOp op) {
  const auto posted = trace_post();
  Work w = do_all_reduce(data, op);
  count(CommOp::all_reduce, bytes_of(data), wire_bytes(CommOp::all_reduce, bytes_of(data), size()));
  return timed(traced(std::move(w), posted, CommOp::all_reduce, bytes_of(data)));
}

Work Communicator::reduce_scatter(Tensor shard, Tensor full, ReduceOp op) {
  const auto posted = trace_post();
  Work w = do_reduce_scatter(shard, full, op);
  count(CommOp::reduce_scatter, bytes_of(full), wire_bytes(CommOp::reduce_scatter, bytes_of(full), size()));
  return timed(traced(std::move(w), posted, CommOp::reduce_scatter, bytes_of(full)));
}

Work Communicator::all_gather(Tensor full, Tensor shard) {
  const auto posted = trace_post();
  Work w = do_all_gather(full, shard);
  count(CommOp::all_gather, bytes_of(full), wire_bytes(CommOp::all_gather, bytes_of(full), size()));
  return timed(traced(std::move(w), posted, CommOp::all_gather, bytes_of(full)));
}

Work Communicator::all_to_all(Tensor out, Tensor in) {
  const auto posted = trace_post();
  Work w = do_all_to_all(out, in);
  count(CommOp::all_to_all, bytes_of(in), wire_bytes(CommOp::all_to_all, bytes_of(in), size()));
  return timed(traced(std::move(w), posted, CommOp::all_to_all, bytes_of(in)));
}

Work Communicator::all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                                std::span<const std::int64_t> in_counts) {
  const auto posted = trace_post();
  Work w = do_all_to_all_v(out, out_counts, in, in_counts);
  // The checks passed: in_counts has one entry per member. What stays with this member is
  // not on the wire.
  const auto element = static_cast<std::int64_t>(dtype_size(in.dtype));
  std::int64_t sent = 0;
  for (std::int64_t c : in_counts) sent += c;
  const std::int64_t own = in_counts[static_cast<std::size_t>(rank())];
  count(CommOp::all_to_all, sent * element, (sent - own) * element);
  return timed(traced(std::move(w), posted, CommOp::all_to_all, sent * element, (sent - own) * element));
}

Work Communicator::broadcast(Tensor data, int root) {
  const auto posted = trace_post();
  Work w = do_broadcast(data, root);
  count(CommOp::broadcast, bytes_of(data), rank() == root ? wire_bytes(CommOp::broadcast, bytes_of(data), size()) : 0);
  return timed(traced(std::move(w), posted, CommOp::broadcast, bytes_of(data),
                rank() == root ? wire_bytes(CommOp::broadcast, bytes_of(data), size()) : 0));
}

Work Communicator::send(Tensor data, int peer, int tag) {
  const auto posted = trace_post();
  Work w = do_send(data, peer, tag);
  count(CommOp::send, bytes_of(data), wire_bytes(CommOp::send, bytes_of(data), size()));
  return timed(traced(std::move(w), posted, CommOp::send, bytes_of(data), -1, peer, tag));
}

Work Communicator::recv(Tensor data, int peer, int tag) {
  const auto posted = trace_post();
  Work w = do_recv(data, peer, tag);
  count(CommOp::recv, bytes_of(data), 0);
  return timed(traced(std::move(w), posted, CommOp::recv, bytes_of(data), -1, peer, tag));
}

std::vector<Work> Communicator::exchange(std::span<const PeerTransfer> transfers) {
  const auto posted = trace_post();
  std::vector<Work> w = do_exchange(transfers);
  for (const PeerTransfer& t : transfers) {
    if (t.kind == PeerTransfer::Kind::send)
      count(CommOp::send, bytes_of(t.data), wire_bytes(CommOp::send, bytes_of(t.data), size()));
    else
      count(CommOp::recv, bytes_of(t.data), 0);
  }
  for (std::size_t i = 0; i < w.size() && i < transfers.size(); ++i) {
    const PeerTransfer& t = transfers[i];
    const CommOp op = t.kind == PeerTransfer::Kind::send ? CommOp::send : CommOp::recv;
    w[i] = timed(traced(std::move(w[i]), posted, op, bytes_of(t.data), -1, t.peer, t.tag));
  }
  return w;
}

Work Communicator::barrier() {
  const auto posted = trace_post();
  Work w = do_barrier();
  count(CommOp::barrier, 0, 0);
  return timed(traced(std::move(w), posted, CommOp::barrier, 0));
}

Work Communicator::timed(Work w) const {
  if (w.complete_already() || size() == 1) return w;
  return Work(std::make_shared<TimedWork>(std::move(w), blocked_ns_));
}

std::chrono::steady_clock::time_point Communicator::trace_post() const {
  // A group of one moves nothing: its operations are not worth a track.
  if (tracer_ == nullptr || !tracer_->recording() || size() == 1) return {};
  return std::chrono::steady_clock::now();
}

Work Communicator::traced(Work w, std::chrono::steady_clock::time_point posted, CommOp op, std::int64_t payload,
                          std::int64_t wire, int peer, int tag) {
  if (posted == std::chrono::steady_clock::time_point{}) return w;
  std::vector<TraceArg> args{{"bytes", payload},
                             {"wire_bytes", wire >= 0 ? wire : wire_bytes(op, payload, size())},
                             {"members", size()}};
  if (peer >= 0) {
    args.push_back({"peer_rank", ranks()[static_cast<std::size_t>(peer)]});
    args.push_back({"tag", tag});
  }
  const std::string track = device() == Device::cuda ? name() + " (device)" : name();
  return traced_work(std::move(w), *tracer_, track, comm_op_name(op), posted, std::move(args));
}

std::string describe_group(const std::string& label, const std::vector<int>& ranks) {
  constexpr std::size_t kShown = 8;  // long groups: first six, an ellipsis, the last one
  std::string list;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks.size() > kShown && i == kShown - 2) {
      list += fmt::format(",...,{} ({} ranks)", ranks.back(), ranks.size());
      break;
    }
    list += fmt::format("{}{}", i ? "," : "", ranks[i]);
  }
  return fmt::format("{} group ({} {})", label, ranks.size() == 1 ? "rank" : "ranks", list);
}

std::string describe_duration(std::chrono::milliseconds d) {
  const double s = static_cast<double>(d.count()) / 1000.0;
  return fmt::format("{:g} s", s);
}

std::string timeout_message(const std::string& operation, const std::string& group, int global_rank,
                            std::chrono::milliseconds timeout) {
  return fmt::format(
      "{} on {} did not complete within {} on rank {}: a peer may have died or be stuck. Check the "
      "other ranks' output for the first error; if steps legitimately take longer, raise the "
      "communication timeout",
      operation, group, describe_duration(timeout), global_rank);
}

std::string overdue_message(const std::string& operation, const std::string& group, int global_rank,
                            std::chrono::milliseconds waited, const std::string& explanation,
                            const std::string& setting) {
  return fmt::format("{} on {} did not complete within {} on rank {}: {}. Check those ranks' output and nodes for the "
                     "first error; if steps legitimately take longer, raise {}",
                     operation, group,
                     describe_duration(waited < std::chrono::seconds(1)
                                           ? waited
                                           : std::chrono::milliseconds(std::chrono::round<std::chrono::seconds>(waited))),
                     global_rank, explanation, setting);
}

}  // namespace ustrain
