#include "core/distributed/straggler_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace ustrain {
namespace {

constexpr double kLagFractionOfStep = 0.10;
constexpr double kMinimumLagMs = 2.0;

}  // namespace

std::optional<Straggler> slowest_rank(std::span<const double> busy_ms, double step_ms) {
  if (busy_ms.size() < 2) return std::nullopt;
  std::vector<double> sorted(busy_ms.begin(), busy_ms.end());
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const auto slowest = std::max_element(busy_ms.begin(), busy_ms.end());
  const double lag = *slowest - median;
  if (lag <= kMinimumLagMs || lag <= kLagFractionOfStep * step_ms) return std::nullopt;
  return Straggler{static_cast<int>(slowest - busy_ms.begin()), lag, step_ms, 1};
}

void trace_straggler(Tracer* tracer, const Straggler& s) {
  if (tracer == nullptr || !tracer->recording()) return;
  const auto now = Tracer::Clock::now();
  tracer->record(0, fmt::format("straggler: rank {}", s.rank), "step", now, now,
                 {{"straggler_rank", s.rank}, {"lag_us", static_cast<std::int64_t>(s.lag_ms * 1e3)}});
}

void StragglerWatch::add_step(double step_seconds, double blocked_seconds) {
  step_seconds_ += step_seconds;
  blocked_seconds_ += blocked_seconds;
  ++steps_;
}

std::optional<Straggler> StragglerWatch::compare(ProcessGroup& world) {
  if (world.size() == 1 || steps_ == 0) return std::nullopt;
  const double busy = std::max(0.0, step_seconds_ - blocked_seconds_) * 1e3 / steps_;
  std::vector<double> busy_ms(static_cast<std::size_t>(world.size()), 0.0);
  busy_ms[static_cast<std::size_t>(world.rank())] = busy;
  world.host().all_reduce(Tensor(busy_ms.data(), Shape{world.size()}, DType::f64), ReduceOp::sum).wait();
  const double step_ms = world.sum(step_seconds_ * 1e3 / steps_) / world.size();
  step_seconds_ = blocked_seconds_ = 0;
  steps_ = 0;
  std::optional<Straggler> now = slowest_rank(busy_ms, step_ms);
  if (now && last_ && last_->rank == now->rank) now->intervals = last_->intervals + 1;
  last_ = now;
  if (now && now->intervals >= kIntervalsInARow) return now;
  return std::nullopt;
}

}  // namespace ustrain
