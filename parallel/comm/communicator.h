// The communicator interface: collectives and point-to-point transfers over one group of
// ranks, every operation asynchronous.
//
// Semantics shared by every backend (MPI for host tensors, NCCL for device tensors):
// - Ranks inside a group are indices 0..size()-1 in the order of the group's global ranks
//   (for mesh groups, Mesh::group's order). `peer` and `root` arguments are such indices.
// - Every operation returns at once with a Work handle; the buffers belong to the operation
//   until wait() returns. Dropping a handle does not cancel the operation.
// - Members issue the same operations in the same order (as with MPI and NCCL); one thread
//   at a time issues operations on a communicator.
// - Every operation has a deadline (CommOptions::timeout, counted from when the operation
//   could first make progress, i.e. after the ones issued before it on the same group).
//   Past it, wait() throws CommError naming the group, the operation, the rank and, where the
//   backend can learn them, the members it waited for (peer_verdict.h). The group is then unusable (later operations fail at once with the same message) and the
//   process must exit: see World.
// - Sharded layouts (reduce_scatter, all_gather): the full buffer holds size() shards of
//   equal length, contiguous in rank order; shard i is elements [i*s, (i+1)*s). A length
//   that does not divide evenly is padded at the end: ShardLayout says by how much.
// - Every communicator counts the calls and bytes of the operations this rank issued on it
//   (volume(), CommVolume), in the Ultra-Scale Playbook's convention and as bytes on the wire.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/tensor.h"

namespace ustrain {

class Tracer;

// A communication failure: a peer died, is stuck, or the transport reported an error. The
// message names the group, the operation and this rank, and says what to look at.
class CommError : public UserError {
 public:
  using UserError::UserError;
};

enum class ReduceOp : std::uint8_t {
  sum,
  avg,  // the sum divided by size() in f32 (bf16: then rounded); not for integer dtypes
};
const char* reduce_op_name(ReduceOp op);

struct CommOptions {
  // How long one operation may take once it could start. Past it, the MPI backend asks the
  // members it waits for what they are doing and fails when one does not answer
  // (parallel/comm/peer_verdict.h); the NCCL backend fails at once.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // MPI: how long an operation keeps waiting for members that answer that they are alive
  // but have not reached it (computing, or waiting for others in turn).
  std::chrono::milliseconds patience{std::chrono::minutes(30)};
  // What to raise when operations legitimately take longer, named in messages.
  std::string timeout_setting = "the communication timeout";
};

// How a flat buffer of `numel` elements is split over `parts` ranks: every shard has
// ceil(numel / parts) elements and the full buffer is padded at the end to shard * parts.
// The padding is reduced and gathered like any element; keep it zero.
struct ShardLayout {
  ShardLayout(std::int64_t numel, int parts);
  std::int64_t numel;   // real elements
  int parts;
  std::int64_t shard;   // elements per shard
  std::int64_t padded;  // shard * parts >= numel
  std::int64_t begin(int part) const { return shard * part; }
  // Real (unpadded) elements in `part`'s shard: shard for all but the last ones.
  std::int64_t real_in(int part) const;
};

// The state behind a Work handle, implemented by each backend.
class WorkState {
 public:
  virtual ~WorkState() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
  // Host operations: wait(). Device operations: make the communicator's compute stream wait
  // for the operation, without blocking the host.
  virtual void join_compute() { wait(); }
};

// The handle of an asynchronous operation. A default-constructed Work is already complete.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}

  // Blocks until the operation completed; its results are then in the output buffer (for
  // device tensors: visible to every stream). Throws CommError on failure or timeout.
  void wait() {
    if (state_) state_->wait();
  }
  // True once complete, without blocking. Throws CommError on failure or timeout.
  bool test() { return !state_ || state_->test(); }
  // Orders the operation before the compute that follows, the way the tensors' device
  // wants it: a host operation is waited for (as wait()); a device operation makes the
  // compute stream wait for it on the GPU and returns at once, so the host never polls on
  // the critical path (a failure then surfaces at the next wait()).
  void join_compute() {
    if (state_) state_->join_compute();
  }
  // A handle whose wait() and test() throw CommError(message): an operation that could not
  // be started.
  static Work failed(std::string message);
  // True for a handle of nothing to wait for (default-constructed).
  bool complete_already() const { return !state_; }

 private:
  std::shared_ptr<WorkState> state_;
};

// Waits for every handle in order; the first failure is thrown.
void wait_all(std::span<Work> works);

// One half of a point-to-point transfer in a batch (Communicator::exchange).
struct PeerTransfer {
  enum class Kind : std::uint8_t { send, recv };
  Kind kind = Kind::send;
  Tensor data;
  int peer = 0;  // member index
  int tag = 0;
};

// The kinds of operation a communicator counts (CommVolume).
enum class CommOp : std::uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  all_to_all,  // all_to_all and all_to_all_v
  broadcast,
  send,
  recv,
  barrier,
};
inline constexpr int kCommOpCount = 8;
const char* comm_op_name(CommOp op);

// The bytes one member sends for one operation over a group of `members` ranks under the
// ring algorithms, where `payload_bytes` is the operation's payload as CommVolume counts it
// (B below). Every figure is 0 for a group of one.
//   all_reduce                 2 (n-1)/n B, rounded down (a reduce-scatter then an all-gather)
//   reduce_scatter, all_gather   (n-1)/n B of the full buffer (every shard but its own, once)
//   all_to_all                   (n-1)/n B of the input (every chunk but its own)
//   broadcast                  B: the root's figure (the other members send nothing)
//   send                       B
//   recv, barrier              0
std::int64_t wire_bytes(CommOp op, std::int64_t payload_bytes, int members);

// One kind of operation's count.
struct OpVolume {
  std::int64_t calls = 0;
  // The size of the buffer the operation is about: all_reduce and broadcast the buffer,
  // reduce_scatter and all_gather the full buffer, all_to_all the input (all_to_all_v: the
  // elements the counts send), send and recv the message. This is the Ultra-Scale
  // Playbook's Ψ for one call.
  std::int64_t payload_bytes = 0;
  // The bytes this member sent: wire_bytes() of each call (all_to_all_v: exactly what went
  // to the other members; broadcast: 0 unless this member was the root).
  std::int64_t wire_bytes = 0;

  OpVolume& operator+=(const OpVolume& o);
  OpVolume& operator-=(const OpVolume& o);
  bool operator==(const OpVolume&) const = default;
};

// What a communicator moved since it was made or last reset, per kind of operation.
// Counted when an operation is issued (an operation rejected by its argument checks is not
// counted; one issued on a group that already failed is).
struct CommVolume {
  OpVolume all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, send, recv, barrier;

  OpVolume& operator[](CommOp op);
  const OpVolume& operator[](CommOp op) const;
  // Every kind added up.
  OpVolume total() const;
  // The Playbook's count of the bytes a step moves, in which data parallelism's all-reduce
  // costs 2Ψ and ZeRO's reduce-scatter and all-gather Ψ each (so ZeRO-1/2 move 2Ψ and ZeRO-3
  // 3Ψ): all_reduce payloads twice, reduce_scatter, all_gather, all_to_all, broadcast and
  // send payloads once. recv is left out: its bytes are the peer's send.
  std::int64_t playbook_bytes() const;
  // Summing the volumes of several groups, or the difference between two readings.
  CommVolume& operator+=(const CommVolume& o);
  CommVolume& operator-=(const CommVolume& o);
  bool operator==(const CommVolume&) const = default;
  // One line per kind that was used, then the total; empty when nothing was counted:
  //   "all_reduce           3 calls  payload   1.50 MiB  wire   2.25 MiB"
  // and a last line with playbook_bytes().
  std::string summary() const;
};

// The operations are non-virtual: each counts its volume (volume()) and hands over to the
// backend's do_ function, so every backend counts the same way. Counting happens on the
// issuing thread, and only one thread at a time issues operations on a communicator (see
// above), so the counters are plain integers.
class Communicator {
 public:
  virtual ~Communicator() = default;

  // This rank's index in the group, and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Global ranks of the members, in group order.
  virtual const std::vector<int>& ranks() const = 0;
  // For messages: "dp group (ranks 0,1,2,3)".
  virtual const std::string& name() const = 0;
  virtual Device device() const = 0;

  // In place: `data` becomes the reduction of every member's `data`.
  Work all_reduce(Tensor data, ReduceOp op = ReduceOp::sum);
  // `full` (size() * shard.numel() elements, the same on every member) is reduced over the
  // members; this rank receives its shard of the result in `shard`. `shard` is either a
  // separate buffer or exactly this rank's shard of `full` (in place). `full` is scratch
  // afterwards: only `shard` is defined.
  Work reduce_scatter(Tensor shard, Tensor full, ReduceOp op = ReduceOp::sum);
  // `full` (size() * shard.numel() elements) receives every member's `shard` in rank
  // order. `shard` may be exactly this rank's shard of `full` (in place).
  Work all_gather(Tensor full, Tensor shard);
  // `in` and `out` hold size() equal chunks; chunk j of `in` goes to member j and arrives
  // as chunk rank() of its `out`. Buffers must not overlap.
  Work all_to_all(Tensor out, Tensor in);
  // As all_to_all with per-member element counts: in_counts[j] elements go to member j,
  // out_counts[j] arrive from member j; chunks are contiguous in rank order, starting at 0.
  Work all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                    std::span<const std::int64_t> in_counts);
  // From member `root`'s `data` to every member's `data`.
  Work broadcast(Tensor data, int root);
  // Point to point inside the group; a send matches the recv with the same peer and tag
  // (NCCL has no tags and matches per peer in issue order: issue them in the same order on
  // both sides).
  Work send(Tensor data, int peer, int tag = 0);
  Work recv(Tensor data, int peer, int tag = 0);
  // Starts every transfer of the batch at once, so that neighbours that both send before they
  // receive (pipeline stages, ring exchanges) cannot deadlock. Returns one handle per transfer:
  // MPI completes each on its own; NCCL completes the batch as a whole (one group call), so
  // there every handle waits for the whole batch. Counted as the sends and receives it holds.
  std::vector<Work> exchange(std::span<const PeerTransfer> transfers);
  Work barrier();

  // The volume counted so far on this rank, and starting the count again (for example at
  // each step). Read and reset on the issuing thread.
  const CommVolume& volume() const { return volume_; }
  void reset_volume() { volume_ = CommVolume{}; }

  // Seconds this rank's thread(s) spent blocked waiting for this communicator's operations to
  // complete (wait(), and join_compute() of host operations): time spent waiting for peers, a
  // straggler's cost to the others (core/distributed/straggler_watch.h).
  double blocked_seconds() const { return static_cast<double>(blocked_ns_->load()) * 1e-9; }

  // Records the operations of a group of several ranks into `tracer` while it records
  // (parallel/comm/comm_trace.h); null stops. The tracer must outlive the handles traced into it.
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }

 protected:
  // The backends' operations, with the arguments and semantics of the public ones above.
  // They check their arguments (throwing before anything is counted) and start the
  // operation; they do not count.
  virtual Work do_all_reduce(Tensor data, ReduceOp op) = 0;
  virtual Work do_reduce_scatter(Tensor shard, Tensor full, ReduceOp op) = 0;
  virtual Work do_all_gather(Tensor full, Tensor shard) = 0;
  virtual Work do_all_to_all(Tensor out, Tensor in) = 0;
  virtual Work do_all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                               std::span<const std::int64_t> in_counts) = 0;
  virtual Work do_broadcast(Tensor data, int root) = 0;
  virtual Work do_send(Tensor data, int peer, int tag) = 0;
  virtual Work do_recv(Tensor data, int peer, int tag) = 0;
  virtual std::vector<Work> do_exchange(std::span<const PeerTransfer> transfers) = 0;
  virtual Work do_barrier() = 0;

 private:
  void count(CommOp op, std::int64_t payload_bytes, std::int64_t wire_bytes);
  // Tracing: when an operation is posted (the clock's epoch when it is not traced), and its
  // handle wrapped to record its span; `wire` < 0: wire_bytes(op, payload, size()).
  std::chrono::steady_clock::time_point trace_post() const;
  Work traced(Work w, std::chrono::steady_clock::time_point posted, CommOp op, std::int64_t payload,
              std::int64_t wire = -1, int peer = -1, int tag = -1);

  // `w` wrapped so that the time its waits block adds to blocked_ns_.
  Work timed(Work w) const;

  CommVolume volume_;  // touched only by the issuing thread: no synchronisation
  Tracer* tracer_ = nullptr;
  // Shared with the handles, which may be waited for on another thread or after the
  // communicator is gone.
  std::shared_ptr<std::atomic<std::int64_t>> blocked_ns_ = std::make_shared<std::atomic<std::int64_t>>(0);
};

// "dp group (ranks 0,1,2,3)"; long rank lists are abbreviated in the middle.
std::string describe_group(const std::string& label, const std::vector<int>& ranks);
// "5 s", "0.25 s": for messages.
std::string describe_duration(std::chrono::milliseconds d);
// The message every backend uses when an operation passes its deadline.
std::string timeout_message(const std::string& operation, const std::string& group, int global_rank,
                            std::chrono::milliseconds timeout);
// The same when the backend could ask the members what they were doing: `explanation` names
// the ranks (PeerVerdict::explanation), `setting` what to raise if steps legitimately take longer.
std::string overdue_message(const std::string& operation, const std::string& group, int global_rank,
                            std::chrono::milliseconds waited, const std::string& explanation,
                            const std::string& setting);

}  // namespace ustrain
