// A recorder of timed spans for one rank: what `log.trace_steps` turns into a Chrome trace
// (written by core/trace/). It lives here, below the communicators, because they record their
// operations into it; it knows nothing of files or JSON.
//
// - Tracks: named rows of the timeline (the training loop, one per communicator), numbered in
//   the order of first use. Spans on one track nest or follow each other; operations that
//   overlap on one communicator each take a lane, a track of its own ("dp group (ranks 0,1)",
//   "dp group (ranks 0,1) #2", ...), held from posting to completion.
// - Times: steady-clock nanoseconds since the origin given to start() (core/trace/ agrees on
//   it across ranks).
// - Cost: the tracer is an object passed to the code that records (null when tracing is off).
//   Outside the traced steps recording() is false and recording code does nothing else.
// - Threads: spans are recorded by the training thread; a mutex makes a stray completion on
//   another thread safe, not fast.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ustrain {

// An argument of a span, shown beside it in the viewer: a literal key and a number.
struct TraceArg {
  const char* key;
  std::int64_t value;
};

struct TraceEvent {
  std::string name;
  const char* category;  // a literal: "step", "compute", "layer", "comm", ...
  int track = 0;
  std::int64_t begin_ns = 0, end_ns = 0;  // since the origin
  std::int64_t step = 0;                  // the step being traced when the span began
  std::vector<TraceArg> args;
};

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;

  Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  // Recording on, times counted from `origin`; then off again. The events stay until clear().
  void start(Clock::time_point origin);
  void stop() { recording_.store(false, std::memory_order_relaxed); }
  // The step stamped on the spans that begin from now on.
  void set_step(std::int64_t step) { step_ = step; }
  std::int64_t step() const { return step_; }

  // The track named `name`, created on first use. Track 0 is "training loop".
  int track(std::string_view name);
  // The lowest free lane of `group` (a track of its own), held until release_lane().
  int take_lane(std::string_view group);
  void release_lane(int track);

  void record(int track, std::string name, const char* category, Clock::time_point begin, Clock::time_point end,
              std::vector<TraceArg> args = {}, std::int64_t step = -1);  // step -1: the current one

  // What was recorded, and the track names by id.
  std::vector<TraceEvent> events() const;
  std::vector<std::string> track_names() const;
  void clear();

 private:
  struct Lane {
    std::string group;
    int track = 0;
    bool busy = false;
  };
  int track_locked(std::string_view name);

  std::atomic<bool> recording_{false};
  std::int64_t step_ = 0;
  Clock::time_point origin_{};
  mutable std::mutex mutex_;
  std::vector<std::string> tracks_;
  std::vector<Lane> lanes_;
  std::vector<TraceEvent> events_;
};

// Records a span over its own lifetime on `track` of `tracer`, when the tracer is there and
// recording at construction; otherwise it costs a null check and a flag. `name` is a string,
// or a callable that makes one (called only when recording, so nothing is built otherwise).
class TraceScope {
 public:
  template <class Name>
  TraceScope(Tracer* tracer, int track, const char* category, Name&& name, std::initializer_list<TraceArg> args = {})
      : tracer_(tracer && tracer->recording() ? tracer : nullptr) {
    if (!tracer_) return;
    track_ = track;
    category_ = category;
    if constexpr (std::is_invocable_v<Name>)
      name_ = name();
    else
      name_ = std::string(std::forward<Name>(name));
    args_.assign(args.begin(), args.end());
    begin_ = Tracer::Clock::now();
  }
  ~TraceScope() {
    if (tracer_) tracer_->record(track_, std::move(name_), category_, begin_, Tracer::Clock::now(), std::move(args_));
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* tracer_;
  int track_ = 0;
  const char* category_ = "";
  std::string name_;
  std::vector<TraceArg> args_;
  Tracer::Clock::time_point begin_{};
};

}  // namespace ustrain
