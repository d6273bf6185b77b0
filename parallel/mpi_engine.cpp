#include "parallel/mpi_engine.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "parallel/bf16.h"
#include "parallel/mpi_peer_check.h"
#include "parallel/peer_verdict.h"

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

// How long members have to answer when an overdue operation asks them what they are doing:
// fixed, whatever the operation's timeout, since a busy but healthy member may take a while.
constexpr std::chrono::milliseconds kAnswerWindow{5000};
// How long an operation still gets to complete after a member announced its departure (the
// data it needed may already be on its way).
constexpr std::chrono::milliseconds kDepartureGrace{1000};
// How often an idle progress thread looks for questions from its peers.
constexpr std::chrono::milliseconds kIdlePoll{20};

struct InFlight {
  Operation op;
  std::shared_ptr<OperationState> state;
  std::vector<MPI_Request> requests;
  Clock::time_point clock_start;  // when it could first make progress
  Clock::time_point check_at;     // when to ask the members what they are doing next
  std::optional<std::int64_t> inquiry;  // the question being asked now
};

// The operation could first make progress at `now`: its clock starts again.
void restart_clock(InFlight& f, Clock::time_point now) {
  f.clock_start = now;
  f.check_at = now + f.op.timeout;
  f.inquiry.reset();
  f.state->set_deadline(f.check_at);
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

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
void f16_sum_op(void* in, void* inout, int* len, MPI_Datatype*) {
  f16::sum_into(static_cast<const _Float16*>(in), static_cast<_Float16*>(inout), *len);
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
  std::string leaving;   // set with abandon while unwinding: announced to the peers on the way out
  std::atomic<bool> exited{false};
  std::shared_ptr<std::atomic<bool>> failed = std::make_shared<std::atomic<bool>>(false);

  // The groups peers may ask about, by key (registered on the issuing thread).
  std::mutex groups_mutex;
  std::vector<std::weak_ptr<Group>> groups;
  std::map<std::uint64_t, int> keys_seen;  // how many groups had each key's members and label

  // Touched by the progress thread only.
  std::unique_ptr<PeerCheck> peers;
  Clock::time_point idle_since = Clock::now();

  void run();
  void start(InFlight& f);
  bool poll(std::list<InFlight>& in_flight);
  void check_overdue(InFlight& f, Clock::time_point now, bool& settled);
  void fail(InFlight& f, const std::string& message);
  LocalView local_view(const std::list<InFlight>& in_flight);
  // The departure that ends operations issued or pending `kDepartureGrace` after it arrived.
  const Departure* departure(Clock::time_point now) const;
};

namespace {
// Cancels the requests of a send or receive that will not be waited for again, so that MPI
// never writes into (or reads from) its buffer once the caller has given it up. Cancelling a
// receive that has not matched is local and completes at once; one already matched, or a
// send, gets a short while to finish, and is then freed. Collectives cannot be cancelled.
void cancel_point_to_point(InFlight& f) {
  if (f.op.peer < 0) return;
  for (MPI_Request& r : f.requests) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    const Clock::time_point until = Clock::now() + std::chrono::milliseconds(100);
    int done = 0;
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && Clock::now() < until)
      std::this_thread::yield();
    if (!done && r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
}
}  // namespace

void Engine::Shared::fail(InFlight& f, const std::string& message) {
  cancel_point_to_point(f);
  f.op.group->set_failure(message);
  failed->store(true);
  f.state->fail(message);
  // The first failure ends this rank's part in the job: tell the others, so that they stop
  // waiting for it. A failure caused by another rank's departure is not news to anyone.
  if (peers && peers->departures().empty())
    peers->announce_departure(message);
}

const Departure* Engine::Shared::departure(Clock::time_point now) const {
  if (!peers || peers->departures().empty()) return nullptr;
  const Departure& d = peers->departures().front();
  return now - d.noticed >= kDepartureGrace ? &d : nullptr;
}

void Engine::Shared::start(InFlight& f) {
  if (const std::string earlier = f.op.group->failure(); !earlier.empty()) {
    f.state->fail(fmt::format("{} on {} was not started: the group failed earlier: {}", f.op.what,
                              f.op.group->name(), earlier));
    return;
  }
  if (const Departure* d = departure(Clock::now())) {
    fail(f, fmt::format("{} on {} was not started on rank {}: rank {} left the job ({})", f.op.what,
                        f.op.group->name(), f.op.group->global_rank(), d->rank, d->reason));
    return;
  }
  restart_clock(f, Clock::now());
  if (const int rc = f.op.start(f.requests); rc != MPI_SUCCESS)
    fail(f, fmt::format("{} on {} failed on rank {}: {}", f.op.what, f.op.group->name(), f.op.group->global_rank(),
                        mpi_error_text(rc)));
}

LocalView Engine::Shared::local_view(const std::list<InFlight>& in_flight) {
  LocalView view;
  view.started = [this](std::uint64_t key, std::int64_t index) -> std::optional<bool> {
    std::lock_guard lock(groups_mutex);
    for (const std::weak_ptr<Group>& weak : groups)
      if (const std::shared_ptr<Group> g = weak.lock(); g && g->key() == key) return g->issued() > index;
    return std::nullopt;
  };
  view.activity = [this, &in_flight] {
    const Clock::time_point now = Clock::now();
    if (in_flight.empty()) return fmt::format("it is alive and has not communicated for {:.0f} s",
                                              seconds_between(idle_since, now));
    const InFlight& oldest = in_flight.front();
    return fmt::format("it is alive, waiting {:.0f} s for {} on {}", seconds_between(oldest.clock_start, now),
                       oldest.op.what, oldest.op.group->name());
  };
  return view;
}

// An operation past its deadline asks the other members what they are doing, then either
// keeps waiting (they are alive) or fails naming them.
void Engine::Shared::check_overdue(InFlight& f, Clock::time_point now, bool& settled) {
  const std::chrono::milliseconds window = kAnswerWindow;
  if (!f.inquiry) {
    std::vector<int> members;
    if (f.op.peer >= 0) {
      members.push_back(f.op.peer);
    } else {
      for (int r : f.op.group->ranks())
        if (r != f.op.group->global_rank()) members.push_back(r);
    }
    f.inquiry = peers->ask(f.op.group->key(), f.op.index, members, now + window);
    f.state->set_deadline(now + window);  // wait()'s own fallback, should this thread hang
    return;
  }
  std::optional<std::vector<PeerAnswer>> answers = peers->answers(*f.inquiry, now);
  if (!answers) return;
  f.inquiry.reset();
  // A peer's count of operations on the group says nothing about one send or receive: a
  // pipeline stage issues its sends and receives in its own order. A peer that answers is
  // alive and has not yet posted the counterpart (a slow stage is not a dead one).
  if (f.op.peer >= 0)
    for (PeerAnswer& a : *answers) a.started = false;
  const PeerVerdict verdict = judge(*answers, describe_duration(window));
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - f.clock_start);
  if (verdict.keep_waiting && waited < std::max(f.op.patience, f.op.timeout)) {
    f.check_at = now + f.op.timeout;
    f.state->set_deadline(f.check_at);
    return;
  }
  fail(f, overdue_message(f.op.what, f.op.group->name(), f.op.group->global_rank(), waited, verdict.explanation,
                          f.op.timeout_setting));
  settled = true;
}

// Tests every operation in flight once; returns whether any completed.
bool Engine::Shared::poll(std::list<InFlight>& in_flight) {
  bool progressed = false;
  const Clock::time_point now = Clock::now();
  for (auto it = in_flight.begin(); it != in_flight.end();) {
    if (const std::string earlier = it->op.group->failure(); !earlier.empty()) {
      cancel_point_to_point(*it);
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
        if (later->op.group == it->op.group) restart_clock(*later, now);
      progressed = true;
    } else if (const Departure* d = departure(now)) {
      fail(*it, fmt::format("{} on {} did not complete on rank {}: rank {} left the job ({})", it->op.what,
                            it->op.group->name(), it->op.group->global_rank(), d->rank, d->reason));
    } else {
      bool settled = false;
      if (now >= it->check_at) check_overdue(*it, now, settled);
      if (!settled) {
        ++it;
        continue;
      }
    }
    it = in_flight.erase(it);
  }
  if (in_flight.empty() && progressed) idle_since = now;
  return progressed;
}

void Engine::Shared::run() {
  std::list<InFlight> in_flight;
  const LocalView view = local_view(in_flight);
  int idle_polls = 0;
  for (;;) {
    std::deque<InFlight> arrived;
    {
      std::unique_lock lock(mutex);
      // Idle, it still wakes now and then to answer its peers' questions.
      if (in_flight.empty()) wake.wait_for(lock, kIdlePoll, [&] { return stop || !queue.empty(); });
      if (abandon || (stop && queue.empty() && in_flight.empty())) break;
      arrived.swap(queue);
    }
    peers->poll(view);
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
  std::string farewell;
  {
    std::lock_guard lock(mutex);
    farewell = leaving;
  }
  if (!farewell.empty() && !peers->announced()) {
    // Leaving during an error: tell the others, and give the notices a moment to go out.
    peers->announce_departure(farewell);
    const Clock::time_point until = Clock::now() + std::chrono::milliseconds(200);
    while (peers->sending() && Clock::now() < until) {
      peers->poll(view);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  } else if (!abandon) {
    peers->close();
  }
  exited.store(true);
}

Engine::Engine() : shared_(std::make_shared<Shared>()) {
  shared_->peers = std::make_unique<PeerCheck>();
  MPI_Comm_dup(MPI_COMM_WORLD, &world_);
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  MPI_Op_create(&bf16_sum_op, /*commute=*/1, &half_sums_.bf16);
  MPI_Op_create(&f16_sum_op, /*commute=*/1, &half_sums_.f16);
  std::thread([shared = shared_] { shared->run(); }).detach();
}

bool Engine::shut_down(bool drain) {
  if (shut_down_) return false;
  shut_down_ = true;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stop = true;
    shared_->abandon = !drain || shared_->failed->load();
    if (!drain) shared_->leaving = "it stopped after an error (see its output)";
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
  MPI_Op_free(&half_sums_.bf16);
  MPI_Op_free(&half_sums_.f16);
  MPI_Comm_free(&world_);
  return true;
}

Engine::~Engine() {
  if (!shut_down_) shut_down(/*drain=*/false);
}

void Engine::add_group(const std::shared_ptr<Group>& group) {
  // Members agree on the label and the ranks, and create their groups in the same order: the
  // n-th group with these on one member is the n-th on every other.
  const std::uint64_t base = fnv1a(fmt::format("{}|{}", group->name(), fmt::join(group->ranks(), ",")));
  std::lock_guard lock(shared_->groups_mutex);
  const int occurrence = shared_->keys_seen[base]++;
  group->set_key(base ^ (0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(occurrence + 1)));
  std::erase_if(shared_->groups, [](const std::weak_ptr<Group>& g) { return g.expired(); });
  shared_->groups.push_back(group);
}

Work Engine::submit(Operation op) {
  op.index = op.group->issue();
  const std::string message =
      timeout_message(op.what, op.group->name(), op.group->global_rank(), op.timeout);
  auto state = std::make_shared<OperationState>(message, Clock::now() + op.timeout, shared_->failed);
  {
    std::lock_guard lock(shared_->mutex);
    shared_->queue.push_back(InFlight{std::move(op), state, {}, {}, {}, {}});
  }
  shared_->wake.notify_one();
  return Work(state);
}

bool Engine::failed() const { return shared_->failed->load(); }

}  // namespace ustrain::mpi_detail
