// The channel over which ranks ask each other about an overdue operation and announce that
// they leave the job (parallel/comm/peer_verdict.h says what the answers mean).
//
// It is a duplicate of MPI_COMM_WORLD used only by the progress thread (mpi_engine.h), which
// keeps one receive posted on it and polls it between operations and every few
// milliseconds while idle, so a rank answers while its main thread computes. A rank whose
// process is stopped or whose progress thread is blocked inside MPI does not answer, which
// is exactly what the asking rank wants to learn.
//
// Messages (one fixed-size record each): a question (is operation N of group K started
// there, and what is its communication doing), its answer, and a departure notice (this rank
// leaves the job, and why) after which the others stop waiting for it.
//
// Internal to parallel/ (includes mpi.h).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "parallel/comm/mpi_channel.h"
#include "parallel/comm/peer_verdict.h"

namespace ustrain::mpi_detail {

// What this rank tells a peer that asks.
struct LocalView {
  // Whether this rank has issued operation `index` of `channel` (as this rank counts it) of the
  // group `key`; nullopt when it has no such group (not created yet, or freed).
  std::function<std::optional<bool>(std::uint64_t key, const Channel& channel, std::int64_t index)> started;
  // What its communication is doing now (PeerAnswer::activity).
  std::function<std::string()> activity;
};

struct Departure {
  int rank = 0;
  std::string reason;
  std::chrono::steady_clock::time_point noticed;
};

class PeerCheck {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective over MPI_COMM_WORLD (MPI_Comm_dup), on the thread that initialised MPI,
  // before the progress thread starts.
  PeerCheck();
  ~PeerCheck();
  PeerCheck(const PeerCheck&) = delete;
  PeerCheck& operator=(const PeerCheck&) = delete;

  // Everything below runs on the progress thread.

  // Answers questions and records answers and departures that arrived.
  void poll(const LocalView& view);
  // Asks each of `members` (global ranks, not this one) about operation `index` of `channel`
  // of group `key`, the channel as they count it (its peer, if any, is the asking rank); they
  // have until `until` to answer. Returns the inquiry's id.
  std::int64_t ask(std::uint64_t key, const Channel& channel, std::int64_t index, const std::vector<int>& members,
                   Clock::time_point until);
  // The answers, once every member answered or the time is up; nullopt before.
  std::optional<std::vector<PeerAnswer>> answers(std::int64_t inquiry, Clock::time_point now);
  // Tells every other rank that this one leaves the job, and why; best effort.
  void announce_departure(const std::string& reason);
  bool announced() const { return announced_; }
  // Whether messages are still on their way out.
  bool sending() const { return !outgoing_.empty(); }
  // Ranks that announced their departure, in the order the notices arrived.
  const std::vector<Departure>& departures() const { return departures_; }
  // Withdraws the posted receive and frees the channel: only when shutting down cleanly.
  void close();

 private:
  struct Message;
  struct Outgoing;
  struct Inquiry {
    std::vector<int> members;
    std::map<int, PeerAnswer> answers;
    Clock::time_point until;
  };

  void post_receive();
  void send(const Message& m, int to);
  void handle(const Message& m, int from, const LocalView& view);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Message> incoming_;
  MPI_Request receive_ = MPI_REQUEST_NULL;
  std::list<Outgoing> outgoing_;
  std::map<std::int64_t, Inquiry> inquiries_;
  std::int64_t next_inquiry_ = 0;
  std::vector<Departure> departures_;
  bool announced_ = false;
};

}  // namespace ustrain::mpi_detail
