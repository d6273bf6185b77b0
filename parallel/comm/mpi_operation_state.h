// The Work state of one operation of the MPI progress engine (mpi_engine.h): the progress
// thread completes or fails it; the caller waits on it. Should the progress thread itself be
// stuck inside MPI (e.g. creating a communicator with a dead peer), wait() reports the
// timeout on its own, a grace period past the operation's deadline, and marks the engine
// failed so that the thread, if it ever returns, makes no further MPI call.
//
// Internal to parallel/.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "parallel/comm/communicator.h"

namespace ustrain::mpi_detail {

class OperationState final : public WorkState {
 public:
  using Clock = std::chrono::steady_clock;

  OperationState(std::string timeout_message, Clock::time_point deadline,
                 std::shared_ptr<std::atomic<bool>> engine_failed)
      : timeout_message_(std::move(timeout_message)), deadline_(deadline), engine_failed_(std::move(engine_failed)) {}

  void wait() override;
  bool test() override;

  bool pending();
  void complete() { settle(Status::done, {}); }
  void fail(std::string message) { settle(Status::failed, std::move(message)); }
  void set_deadline(Clock::time_point deadline);

 private:
  enum class Status { pending, done, failed };

  void settle(Status status, std::string message);
  void give_up_if_overdue();
  void throw_if_failed() const;

  std::mutex mutex_;
  std::condition_variable cv_;
  Status status_ = Status::pending;
  std::string error_;
  const std::string timeout_message_;
  Clock::time_point deadline_;
  std::shared_ptr<std::atomic<bool>> engine_failed_;
};

}  // namespace ustrain::mpi_detail
