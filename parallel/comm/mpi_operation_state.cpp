#include "parallel/comm/mpi_operation_state.h"

namespace ustrain::mpi_detail {
namespace {

// How long wait() gives the progress thread beyond an operation's deadline before it
// concludes that the thread itself is stuck inside MPI and reports the timeout on its own.
constexpr std::chrono::seconds kGrace{2};

}  // namespace

void OperationState::wait() {
  std::unique_lock lock(mutex_);
  while (status_ == Status::pending) {
    if (cv_.wait_until(lock, deadline_ + kGrace) == std::cv_status::timeout) give_up_if_overdue();
  }
  throw_if_failed();
}

bool OperationState::test() {
  std::unique_lock lock(mutex_);
  if (status_ == Status::pending) give_up_if_overdue();
  throw_if_failed();
  return status_ == Status::done;
}

bool OperationState::pending() {
  std::lock_guard lock(mutex_);
  return status_ == Status::pending;
}

void OperationState::set_deadline(Clock::time_point deadline) {
  std::lock_guard lock(mutex_);
  deadline_ = deadline;
}

void OperationState::settle(Status status, std::string message) {
  {
    std::lock_guard lock(mutex_);
    if (status_ != Status::pending) return;
    status_ = status;
    error_ = std::move(message);
  }
  cv_.notify_all();
}

void OperationState::give_up_if_overdue() {
  if (status_ != Status::pending || Clock::now() < deadline_ + kGrace) return;
  status_ = Status::failed;
  error_ = timeout_message_;
  engine_failed_->store(true);
}

void OperationState::throw_if_failed() const {
  if (status_ == Status::failed) throw CommError(error_);
}

}  // namespace ustrain::mpi_detail
