// The MPI progress engine: one thread per World that makes every MPI call after
// MPI_Init, so that nonblocking operations progress while the caller computes.
//
// Open MPI progresses a nonblocking collective only inside MPI calls; a caller busy with a
// GEMM makes none. The engine's thread posts each queued operation (MPI_Iallreduce, ...) and
// tests the requests in flight until they complete, then marks their Work done. It also
// owns the deadlines: an operation that passes its own asks the members it waits for what
// they are doing (mpi_peer_check.h) and fails with a CommError naming the ranks that did not
// answer (or, past its patience, those that have not reached it), and its group is marked
// unusable. A rank that fails, or leaves the job during an error, tells the others, so that
// the whole job stops within seconds instead of each rank waiting out its own deadline.
// After its first failure the thread makes no further MPI call, and only then tells the
// callers: a collective cannot be cancelled (nor always a receive), and MPI would otherwise go
// on moving its data into buffers the callers free as they unwind.
//
// Thread level: MPI is called from two threads (the main thread initialises and finalises,
// the progress thread does everything between) but never from two at once, which is what
// MPI_THREAD_SERIALIZED promises. MPI_THREAD_MULTIPLE would add locking inside Open MPI for
// nothing.
//
// Internal to parallel/ (includes mpi.h).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/comm/mpi_channel.h"
#include "parallel/comm/mpi_types.h"

#include "parallel/comm/communicator.h"

namespace ustrain::mpi_detail {

// What the operations on one MPI communicator share: its name for messages, its members,
// the key under which peers ask about it (mpi_peer_check.h), how many operations this rank
// has issued on each channel of it and, once an operation failed, the reason.
class Group {
 public:
  Group(std::string name, int global_rank, std::vector<int> ranks)
      : name_(std::move(name)), global_rank_(global_rank), ranks_(std::move(ranks)) {}
  const std::string& name() const { return name_; }
  int global_rank() const { return global_rank_; }
  const std::vector<int>& ranks() const { return ranks_; }
  std::uint64_t key() const { return key_; }
  void set_key(std::uint64_t key) { key_ = key; }  // by Engine::add_group, before any operation
  // The index of the next operation issued on `channel` (0, 1, ...), and how many have been.
  std::int64_t issue(const Channel& channel);
  std::int64_t issued(const Channel& channel) const;
  std::string failure() const;
  void set_failure(const std::string& reason);  // keeps the first reason

 private:
  const std::string name_;
  const int global_rank_;
  const std::vector<int> ranks_;
  std::uint64_t key_ = 0;
  mutable std::mutex mutex_;
  std::map<Channel, std::int64_t> issued_;
  std::string failure_;
};

// One operation, as queued by a communicator.
struct Operation {
  std::string what;  // "collective all_reduce of 1001 f32 (sum)"
  std::shared_ptr<Group> group;
  std::chrono::milliseconds timeout{};
  // How long it may wait for members that answer that they are alive (CommOptions::patience).
  std::chrono::milliseconds patience{};
  std::string timeout_setting;  // CommOptions::timeout_setting, for messages
  // A collective, or a send or receive: an overdue one of those asks only its peer, and its
  // requests are cancelled when it fails.
  Channel channel;
  std::int64_t index = 0;  // its place among the group's operations on its channel (set by submit)
  // Runs on the progress thread: posts nonblocking requests into `requests` (or does
  // something short and blocking, such as creating a communicator). Returns an MPI code.
  std::function<int(std::vector<MPI_Request>& requests)> start;
  // Runs on the progress thread once every request completed (e.g. divides for avg).
  std::function<void()> finish;
};

class Engine {
 public:
  // After MPI_Init: duplicates MPI_COMM_WORLD, creates the bf16 reduction and starts the
  // progress thread.
  Engine();
  // Stops the progress thread. With `drain`, the operations in flight settle first (each
  // completes or fails by its deadline). After a failure, or without `drain`, the thread is
  // told to stop and left behind if it does not within a second: it may be inside MPI.
  // Returns true when MPI is in a clean state (the thread left, nothing failed), having
  // freed what the constructor made; only then may MPI be finalised.
  bool shut_down(bool drain);
  ~Engine();  // shut_down(false) unless already shut down
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Gives a new communicator's group the key its peers know it by: the same on every member,
  // since members create their groups in the same order. Before its first operation.
  void add_group(const std::shared_ptr<Group>& group);
  Work submit(Operation op);
  // Once any operation failed or timed out, MPI is in an unknown state: do not finalise.
  bool failed() const;

  MPI_Comm world() const { return world_; }
  const mpi_detail::HalfSumOps& half_sums() const { return half_sums_; }

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  MPI_Comm world_ = MPI_COMM_NULL;
  mpi_detail::HalfSumOps half_sums_;
  bool shut_down_ = false;
};

// "MPI_ERR_TRUNCATE: message truncated" for an MPI return code.
std::string mpi_error_text(int code);

}  // namespace ustrain::mpi_detail
