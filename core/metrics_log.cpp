#include "core/metrics_log.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

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

}  // namespace

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  out_.open(path, std::ios::out | std::ios::app);
  if (!out_)
    throw UserError("cannot open metrics file '" + path + "' for writing: " +
                    std::strerror(errno) + "; check that its directory exists and is writable");
}

void MetricsLog::write(const std::string& kind,
                       const std::vector<std::pair<std::string, double>>& numbers) {
  nlohmann::ordered_json line;
  line["kind"] = kind;
  for (const auto& [name, value] : numbers) {
    USTRAIN_ASSERT(name != "kind" && name != "time" && !line.contains(name),
                   "metric name '" + name + "' is reserved or repeated");
    line[name] = number_to_json(value);
  }
  line["time"] = unix_seconds_now();
  out_ << line.dump() << '\n';
  out_.flush();
  if (!out_) throw UserError("cannot write to metrics file '" + path_ + "' (is the disk full?)");
}

}  // namespace ustrain
