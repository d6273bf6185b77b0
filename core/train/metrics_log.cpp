#include "core/train/metrics_log.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/run/run_file.h"
#include "core/tensorboard/event_file.h"
#include "kernels/error.h"

namespace ustrain {

namespace {

// Whole numbers below 2^53 are exact in a double and read better as integers.
nlohmann::ordered_json number_to_json(double v) {
  if (!std::isfinite(v)) return nullptr;
  constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53
  if (v == std::trunc(v) && std::fabs(v) < kExactIntegerLimit)
    return static_cast<std::int64_t>(v);
  return v;
}

double unix_seconds_now() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

// The cause as the failed write(2) left it in errno (ENOSPC: "No space left on device").
UserError write_failed(const std::string& path, int error) {
  return UserError("cannot write to metrics file '" + path + "': " +
                   std::strerror(error) +
                   (error == ENOSPC ? "; free space on that filesystem, then resume the run with --resume auto"
                                    : " (is the disk full?)"));
}

}  // namespace

MetricsLog::MetricsLog(const std::string& run_dir, const LogSection& log,
                       std::optional<std::int64_t> resumed_step) {
  if (!resumed_step) remove_event_files(run_dir);
  if (log.jsonl) jsonl_path_ = run_dir + "/metrics.jsonl";
  if (log.tensorboard) {
    events_ = std::make_unique<EventFile>(run_dir, resumed_step.value_or(0) + 1);
    spdlog::info("TensorBoard events: {} (view with: tensorboard --logdir {})", events_->path(), run_dir);
  }
}

MetricsLog::~MetricsLog() = default;

void MetricsLog::write(const std::string& kind,
                       const std::vector<std::pair<std::string, double>>& numbers) {
  const double now = unix_seconds_now();
  std::optional<double> step;
  nlohmann::ordered_json line;
  line["kind"] = kind;
  std::vector<std::pair<std::string, double>> scalars;
  for (const auto& [name, value] : numbers) {
    USTRAIN_ASSERT(name != "kind" && name != "time" && !line.contains(name),
                   "metric name '" + name + "' is reserved or repeated");
    line[name] = number_to_json(value);
    if (name == "step")
      step = value;
    else if (std::isfinite(value))  // as in metrics.jsonl, where these are null: no value
      scalars.emplace_back(kind + "/" + name, value);
  }
  USTRAIN_ASSERT(step.has_value(), "a metrics row of kind '" + kind + "' has no step");
  line["time"] = now;
  if (!jsonl_path_.empty()) {
    if (!jsonl_) jsonl_ = std::make_unique<RunFile>(jsonl_path_, RunFile::Mode::append);
    if (const int error = jsonl_->write(line.dump() + '\n')) throw write_failed(jsonl_path_, error);
  }
  if (events_) events_->write_scalars(static_cast<std::int64_t>(*step), now, scalars);
}

void MetricsLog::sync() {
  if (!jsonl_) return;
  if (const int error = jsonl_->sync()) throw write_failed(jsonl_path_, error);
}

std::string MetricsLog::files() const {
  if (jsonl_path_.empty()) return events_ ? events_->path() : std::string();
  return events_ ? jsonl_path_ + ", " + events_->path() : jsonl_path_;
}

}  // namespace ustrain
