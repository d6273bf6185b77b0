#include "parallel/mpi_engine.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <thread>

#include "parallel/bf16.h"

namespace ustrain::mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;

// How long wait() gives the progress thread beyond an operation's deadline before it
// concludes that the thread itself is stuck inside MPI (e.g. creating a communicator with
// a dead peer) and reports the timeout on its own.
constexpr std::chrono::seconds kGrace{2};

// The Work state of one operation. The progress thread completes or fails it; the caller
// waits on it.
class OperationState final : public WorkState {
 public:
  OperationState(std::string timeout_message, Clock::time_point deadline,
                 std::shared_ptr<std::atomic<bool>> engine_failed)
      : timeout_message_(std::move(timeout_message)), deadline_(deadline), engine_failed_(std::move(engine_failed)) {}

  void wait() override {
    std::unique_lock lock(mutex_);
    while (status_ == Status::pending) {
      if (cv_.wait_until(lock, deadline_ + kGrace) == std::cv_status::timeout) give_up_if_overdue();
    }
    throw_if_failed();
  }

  bool test() override {
    std::unique_lock lock(mutex_);
    if (status_ == Status::pending) give_up_if_overdue();
    throw_if_failed();
    return status_ == Status::done;
  }

  bool pending() {
    std::lock_guard lock(mutex_);
    return status_ == Status::pending;
  }
  void complete() { settle(Status::done, {}); }
  void fail(std::string message) { settle(Status::failed, std::move(message)); }
  const std::string& timeout_message() const { return timeout_message_; }
  void set_deadline(Clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    deadline_ = deadline;
  }

 private:
  enum class Status { pending, done, failed };

  void settle(Status status, std::string message) {
    {
      std::lock_guard lock(mutex_);
      if (status_ != Status::pending) return;
      status_ = status;
      error_ = std::move(message);
    }
    cv_.notify_all();
  }
  void give_up_if_overdue() {
    if (status_ != Status::pending || Clock::now() < deadline_ + kGrace) return;
    status_ = Status::failed;
    error_ = timeout_message_;
    engine_failed_->store(true);
  }
  void throw_if_failed() const {
    if (status_ == Status::failed) throw CommError(error_);
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  Status status_ = Status::pending;
  std::string error_;
  const std::string timeout_message_;
  Clock::time_point deadline_;
  std::shared_ptr<std::atomic<bool>> engine_failed_;
};

struct InFlight {
  Operation op;
  std::shared_ptr<OperationState> state;
  std::vector<MPI_Request> requests;
  Clock::time_point clock_start;  // when it could first make progress
};

// MPI_Testall, with the failing request's own error code instead of MPI_ERR_IN_STATUS.
int test_all(std::vector<MPI_Request>& requests, int& done) {
  if (requests.size() == 1) return MPI_Test(requests.data(), &done, MPI_STATUS_IGNORE);  // the common case
  std::vector<MPI_Status> statuses(requests.size());
  const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
  if (rc == MPI_ERR_IN_STATUS)
    for (const MPI_Status& s : statuses)
      if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING) return s.MPI_ERROR;
  return rc;
}

void bf16_sum_op(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16::sum_into(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout), *len);
}

}  // namespace

std::string Group::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void Group::set_failure(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (failure_.empty()) failure_ = reason;
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

// Everything the progress thread touches; shared so that a thread left behind after a
// failure never outlives what it uses.
struct Engine::Shared {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<InFlight> queue;
  bool stop = false;
  bool abandon = false;  // stop without waiting for MPI (after a failure)
  std::atomic<bool> exited{false};
  std::shared_ptr<std::atomic<bool>> failed = std::make_shared<std::atomic<bool>>(false);

  void run();
  void start(InFlight& f);
  bool poll(std::list<InFlight>& in_flight);
  void fail(InFlight& f, const std::string& message);
};

void Engine::Shared::fail(InFlight& f, const std::string& message) {
  f.op.group->set_failure(message);
  failed->store(true);
  f.state->fail(message);
}

void Engine::Shared::start(InFlight& f) {
  if (const std::string earlier = f.op.group->failure(); !earlier.empty()) {
    f.state->fail(fmt::format("{} on {} was not started: the group failed earlier: {}", f.op.what,
                              f.op.group->name(), earlier));
    return;
  }
  f.clock_start = Clock::now();
  f.state->set_deadline(f.clock_start + f.op.timeout);
  if (const int rc = f.op.start(f.requests); rc != MPI_SUCCESS)
    fail(f, fmt::format("{} on {} failed on rank {}: {}", f.op.what, f.op.group->name(), f.op.group->global_rank(),
                        mpi_error_text(rc)));
}

// Tests every operation in flight once; returns whether any completed.
bool Engine::Shared::poll(std::list<InFlight>& in_flight) {
  bool progressed = false;
  const Clock::time_point now = Clock::now();
  for (auto it = in_flight.begin(); it != in_flight.end();) {
    if (const std::string earlier = it->op.group->failure(); !earlier.empty()) {
      it->state->fail(fmt::format("{} on {} did not complete: the group failed: {}", it->op.what,
                                  it->op.group->name(), earlier));
      it = in_flight.erase(it);
      continue;
    }
    int done = 0;
    const int rc = it->requests.empty() ? MPI_SUCCESS : test_all(it->requests, done);
    if (rc != MPI_SUCCESS) {
      fail(*it, fmt::format("{} on {} failed on rank {}: {}", it->op.what, it->op.group->name(),
                            it->op.group->global_rank(), mpi_error_text(rc)));
    } else if (it->requests.empty() || done) {
      if (it->op.finish) it->op.finish();
      it->state->complete();
      // Later operations on the same group could not progress before this one finished.
      for (auto later = std::next(it); later != in_flight.end(); ++later)
        if (later->op.group == it->op.group) {
          later->clock_start = now;
          later->state->set_deadline(now + later->op.timeout);
        }
      progressed = true;
    } else if (now - it->clock_start > it->op.timeout) {
      fail(*it, it->state->timeout_message());
    } else {
      ++it;
      continue;
    }
    it = in_flight.erase(it);
  }
  return progressed;
}

void Engine::Shared::run() {
  std::list<InFlight> in_flight;
  int idle_polls = 0;
  for (;;) {
    std::deque<InFlight> arrived;
    {
      std::unique_lock lock(mutex);
      if (in_flight.empty()) wake.wait(lock, [&] { return stop || !queue.empty(); });
      if (abandon || (stop && queue.empty() && in_flight.empty())) break;
      arrived.swap(queue);
    }
    for (InFlight& f : arrived) {
      start(f);
      // A failed start has already settled its state; keep only what is in flight.
      if (!f.state->pending()) continue;
      in_flight.push_back(std::move(f));
    }
    if (poll(in_flight)) {
      idle_polls = 0;
    } else if (++idle_polls < 64) {
      std::this_thread::yield();
    } else {
      // Nothing finished for a while: sleep a little so a rank busy computing on a shared
      // core keeps most of it, while large transfers still progress every few microseconds.
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  exited.store(true);
}

Engine::Engine() : shared_(std::make_shared<Shared>()) {
  MPI_Comm_dup(MPI_COMM_WORLD, &world_);
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  MPI_Op_create(&bf16_sum_op, /*commute=*/1, &bf16_sum_);
  std::thread([shared = shared_] { shared->run(); }).detach();
}

bool Engine::shut_down(bool drain) {
  if (shut_down_) return false;
  shut_down_ = true;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stop = true;
    shared_->abandon = !drain || shared_->failed->load();
  }
  shared_->wake.notify_all();
  const Clock::time_point patience = Clock::now() + std::chrono::seconds(1);
  bool abandoning = !drain;
  while (!shared_->exited.load()) {
    if (!abandoning && shared_->failed->load()) {  // an operation failed while draining
      std::lock_guard lock(shared_->mutex);
      shared_->abandon = abandoning = true;
    }
    if (abandoning && Clock::now() > patience) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (shared_->failed->load() || !drain) return false;
  MPI_Op_free(&bf16_sum_);
  MPI_Comm_free(&world_);
  return true;
}

Engine::~Engine() {
  if (!shut_down_) shut_down(/*drain=*/false);
}

Work Engine::submit(Operation op) {
  const std::string message =
      timeout_message(op.what, op.group->name(), op.group->global_rank(), op.timeout);
  auto state = std::make_shared<OperationState>(message, Clock::now() + op.timeout, shared_->failed);
  {
    std::lock_guard lock(shared_->mutex);
    shared_->queue.push_back(InFlight{std::move(op), state, {}, {}});
  }
  shared_->wake.notify_one();
  return Work(state);
}

bool Engine::failed() const { return shared_->failed->load(); }

}  // namespace ustrain::mpi_detail
