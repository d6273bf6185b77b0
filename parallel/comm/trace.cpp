#include "parallel/comm/trace.h"

#include <string>

namespace ustrain {

Tracer::Tracer() { tracks_.emplace_back("training loop"); }

void Tracer::start(Clock::time_point origin) {
  const std::lock_guard lock(mutex_);
  origin_ = origin;
  recording_.store(true, std::memory_order_relaxed);
}

int Tracer::track_locked(std::string_view name) {
  for (std::size_t i = 0; i < tracks_.size(); ++i)
    if (tracks_[i] == name) return static_cast<int>(i);
  tracks_.emplace_back(name);
  return static_cast<int>(tracks_.size() - 1);
}

int Tracer::track(std::string_view name) {
  const std::lock_guard lock(mutex_);
  return track_locked(name);
}

int Tracer::take_lane(std::string_view group) {
  const std::lock_guard lock(mutex_);
  int used = 0;
  for (Lane& lane : lanes_) {
    if (lane.group != group) continue;
    ++used;
    if (!lane.busy) {  // lanes are kept in index order: the first free one is the lowest
      lane.busy = true;
      return lane.track;
    }
  }
  const std::string name = used == 0 ? std::string(group) : std::string(group) + " #" + std::to_string(used + 1);
  lanes_.push_back(Lane{std::string(group), track_locked(name), true});
  return lanes_.back().track;
}

void Tracer::release_lane(int track) {
  const std::lock_guard lock(mutex_);
  for (Lane& lane : lanes_)
    if (lane.track == track) lane.busy = false;
}

void Tracer::record(int track, std::string name, const char* category, Clock::time_point begin, Clock::time_point end,
                    std::vector<TraceArg> args, std::int64_t step) {
  const std::lock_guard lock(mutex_);
  const auto ns = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  };
  events_.push_back(TraceEvent{std::move(name), category, track, ns(begin), ns(end), step < 0 ? step_ : step,
                               std::move(args)});
}

std::vector<TraceEvent> Tracer::events() const {
  const std::lock_guard lock(mutex_);
  return events_;
}

std::vector<std::string> Tracer::track_names() const {
  const std::lock_guard lock(mutex_);
  return tracks_;
}

void Tracer::clear() {
  const std::lock_guard lock(mutex_);
  events_.clear();
}

}  // namespace ustrain
