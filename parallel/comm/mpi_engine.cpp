#include "parallel/comm/mpi_engine.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "parallel/comm/mpi_operation_state.h"
#include "parallel/comm/mpi_peer_check.h"
#include "parallel/comm/mpi_requests.h"
#include "parallel/comm/peer_verdict.h"

namespace ustrain::mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

std::int64_t Group::issue(const Channel& channel) {
  std::lock_guard lock(mutex_);
  return issued_[channel]++;
}

std::int64_t Group::issued(const Channel& channel) const {
  std::lock_guard lock(mutex_);
  const auto it = issued_.find(channel);
  return it == issued_.end() ? 0 : it->second;
}

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
  LocalView view;  // what this rank tells peers that ask
  std::list<InFlight> in_flight;
  Clock::time_point idle_since = Clock::now();
  // Once an operation failed, the first failure: from then on this thread makes no MPI call.
  // A collective cannot be cancelled and a matched receive may not cancel: MPI would go on
  // moving their data into buffers the callers free as they unwind.
  std::string silenced;

  void run();
  void start(InFlight& f);
  bool poll();
  void check_overdue(InFlight& f, Clock::time_point now, bool& settled);
  void fail(InFlight& f, const std::string& message);
  void silence(const std::string& first_failure);
  void refuse(InFlight& f) const;
  void flush_notices();
  LocalView local_view();
  // The departure that ends operations issued or pending `kDepartureGrace` after it arrived.
  const Departure* departure(Clock::time_point now) const;
};

// The first failure ends this rank's part in the job. Its requests are cancelled where they
// can be and the others are told (a failure caused by another rank's departure is not news to
// anyone), while every caller still holds its buffers; then the thread falls silent and only
// then are the callers told.
void Engine::Shared::fail(InFlight& f, const std::string& message) {
  // A caller that gave up on a stuck thread may already have freed its buffers: no MPI call.
  const bool callers_waiting = !failed->load();
  if (callers_waiting && f.op.channel.point_to_point()) cancel_requests(f.requests);
  f.op.group->set_failure(message);
  if (callers_waiting && peers && peers->departures().empty()) {
    peers->announce_departure(message);
    flush_notices();
  }
  f.state->fail(message);
  silence(message);
}

void Engine::Shared::flush_notices() {
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(200);
  while (peers->sending() && Clock::now() < until) {
    peers->poll(view);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Engine::Shared::silence(const std::string& first_failure) {
  failed->store(true);
  if (!silenced.empty()) return;
  silenced = first_failure;
  for (InFlight& f : in_flight) {
    if (!f.state->pending()) continue;
    f.op.group->set_failure(first_failure);
    f.state->fail(fmt::format("{} on {} did not complete on rank {}: this rank stopped communicating after an "
                              "earlier failure: {}",
                              f.op.what, f.op.group->name(), f.op.group->global_rank(), first_failure));
  }
}

void Engine::Shared::refuse(InFlight& f) const {
  f.state->fail(fmt::format("{} on {} was not started on rank {}: this rank stopped communicating after an earlier "
                            "failure: {}",
                            f.op.what, f.op.group->name(), f.op.group->global_rank(), silenced));
}

const Departure* Engine::Shared::departure(Clock::time_point now) const {
  if (!peers || peers->departures().empty()) return nullptr;
  const Departure& d = peers->departures().front();
  return now - d.noticed >= kDepartureGrace ? &d : nullptr;
}

void Engine::Shared::start(InFlight& f) {
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

LocalView Engine::Shared::local_view() {
  LocalView view;
  view.started = [this](std::uint64_t key, const Channel& channel, std::int64_t index) -> std::optional<bool> {
    std::lock_guard lock(groups_mutex);
    for (const std::weak_ptr<Group>& weak : groups)
      if (const std::shared_ptr<Group> g = weak.lock(); g && g->key() == key) return g->issued(channel) > index;
    return std::nullopt;
  };
  view.activity = [this] {
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
    if (f.op.channel.point_to_point()) {
      members.push_back(f.op.channel.peer);
    } else {
      for (int r : f.op.group->ranks())
        if (r != f.op.group->global_rank()) members.push_back(r);
    }
    const Channel theirs = f.op.channel.counterpart(f.op.group->global_rank());
    f.inquiry = peers->ask(f.op.group->key(), theirs, f.op.index, members, now + window);
    f.state->set_deadline(now + window);  // wait()'s own fallback, should this thread hang
    return;
  }
  std::optional<std::vector<PeerAnswer>> answers = peers->answers(*f.inquiry, now);
  if (!answers) return;
  f.inquiry.reset();
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
// After a failure it stops at once: the thread is silent from then on.
bool Engine::Shared::poll() {
  bool progressed = false;
  const Clock::time_point now = Clock::now();
  for (auto it = in_flight.begin(); it != in_flight.end() && silenced.empty();) {
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
  view = local_view();
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
    // A caller gave up on this thread while it was stuck inside MPI, and may have freed its buffers.
    if (failed->load() && silenced.empty())
      silence("an operation timed out while this rank's communication thread was stuck inside MPI");
    if (silenced.empty()) peers->poll(view);
    for (InFlight& f : arrived) {
      if (!silenced.empty()) {
        refuse(f);
        continue;
      }
      start(f);
      // A failed start has already settled its state; keep only what is in flight.
      if (!f.state->pending()) continue;
      in_flight.push_back(std::move(f));
    }
    if (!silenced.empty()) {
      in_flight.clear();  // every one failed; MPI keeps what it holds, untouched from now on
      continue;
    }
    if (poll()) {
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
  if (!silenced.empty()) {
    // Silent since a failure: the others were told then.
  } else if (!farewell.empty() && !peers->announced()) {
    // Leaving during an error: tell the others, and give the notices a moment to go out.
    peers->announce_departure(farewell);
    flush_notices();
  } else if (!abandon) {
    peers->close();
  }
  exited.store(true);
}

Engine::Engine() : shared_(std::make_shared<Shared>()) {
  shared_->peers = std::make_unique<PeerCheck>();
  MPI_Comm_dup(MPI_COMM_WORLD, &world_);
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  half_sums_ = create_half_sum_ops();
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
  free_half_sum_ops(half_sums_);
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
  op.index = op.group->issue(op.channel);
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
