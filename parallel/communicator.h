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
//   Past it, wait() throws CommError naming the group, the operation and the rank. The
//   group is then unusable (later operations fail at once with the same message) and the
//   process must exit: see World.
// - Sharded layouts (reduce_scatter, all_gather): the full buffer holds size() shards of
//   equal length, contiguous in rank order; shard i is elements [i*s, (i+1)*s). A length
//   that does not divide evenly is padded at the end: ShardLayout says by how much.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/tensor.h"

namespace ustrain {

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
  // How long one operation may take once it could start before it is declared failed.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
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
  // A handle whose wait() and test() throw CommError(message): an operation that could not
  // be started.
  static Work failed(std::string message);

 private:
  std::shared_ptr<WorkState> state_;
};

// Waits for every handle in order; the first failure is thrown.
void wait_all(std::span<Work> works);

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
  virtual Work all_reduce(Tensor data, ReduceOp op = ReduceOp::sum) = 0;
  // `full` (size() * shard.numel() elements, the same on every member) is reduced over the
  // members; this rank receives its shard of the result in `shard`. `shard` is either a
  // separate buffer or exactly this rank's shard of `full` (in place). `full` is scratch
  // afterwards: only `shard` is defined.
  virtual Work reduce_scatter(Tensor shard, Tensor full, ReduceOp op = ReduceOp::sum) = 0;
  // `full` (size() * shard.numel() elements) receives every member's `shard` in rank
  // order. `shard` may be exactly this rank's shard of `full` (in place).
  virtual Work all_gather(Tensor full, Tensor shard) = 0;
  // `in` and `out` hold size() equal chunks; chunk j of `in` goes to member j and arrives
  // as chunk rank() of its `out`. Buffers must not overlap.
  virtual Work all_to_all(Tensor out, Tensor in) = 0;
  // As all_to_all with per-member element counts: in_counts[j] elements go to member j,
  // out_counts[j] arrive from member j; chunks are contiguous in rank order, starting at 0.
  virtual Work all_to_all_v(Tensor out, std::span<const std::int64_t> out_counts, Tensor in,
                            std::span<const std::int64_t> in_counts) = 0;
  // From member `root`'s `data` to every member's `data`.
  virtual Work broadcast(Tensor data, int root) = 0;
  // Point to point inside the group; a send matches the recv with the same peer and tag
  // (NCCL has no tags and matches per peer in issue order: issue them in the same order on
  // both sides).
  virtual Work send(Tensor data, int peer, int tag = 0) = 0;
  virtual Work recv(Tensor data, int peer, int tag = 0) = 0;
  virtual Work barrier() = 0;
};

// "dp group (ranks 0,1,2,3)"; long rank lists are abbreviated in the middle.
std::string describe_group(const std::string& label, const std::vector<int>& ranks);
// "5 s", "0.25 s": for messages.
std::string describe_duration(std::chrono::milliseconds d);
// The message every backend uses when an operation passes its deadline.
std::string timeout_message(const std::string& operation, const std::string& group, int global_rank,
                            std::chrono::milliseconds timeout);

}  // namespace ustrain
