#include "core/plan/kept_calibration.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/model/rng.h"
#include "core/monitor/kept_peak.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

// Writes `c` to `path` through a temporary file, so that runs keeping at once leave a whole
// file; returns why it could not, empty when it could.
std::string keep(const Calibration& c, const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return fmt::format("cannot create {}: {}", fs::path(path).parent_path().string(), ec.message());
  const std::string temporary = fmt::format("{}.{}.tmp", path, getpid());
  try {
    write_calibration(c, temporary);
  } catch (const UserError&) {
    fs::remove(temporary, ec);
    return fmt::format("cannot write {}", temporary);
  }
  fs::rename(temporary, path, ec);
  if (!ec) return "";
  const std::string why = fmt::format("cannot replace {}: {}", path, ec.message());
  fs::remove(temporary, ec);
  return why;
}

}  // namespace

std::string kept_calibration_dir() {
  const std::string peaks = kept_peak_path();
  return peaks.empty() ? "" : (fs::path(peaks).parent_path() / "cpu_calibration").string();
}

Calibration kept_calibration(const std::string& dir, const std::string& key,
                             const std::function<Calibration()>& measure) {
  const std::string path = dir.empty() ? "" : fmt::format("{}/{:016x}.json", dir, hash_string(key));
  std::error_code ec;
  if (!path.empty() && fs::is_regular_file(path, ec)) {
    try {
      return read_calibration(path);
    } catch (const UserError&) {
      // A damaged cache entry is measured again and replaced.
    }
  }
  Calibration c = measure();
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
  c.source = fmt::format("{} on {:%Y-%m-%dT%H:%M:%SZ}", c.source, now);
  const std::string not_kept = path.empty() ? "neither XDG_CACHE_HOME nor HOME is set" : keep(c, path);
  c.source += not_kept.empty() ? fmt::format(", kept in {}", path) : fmt::format(" (not kept: {})", not_kept);
  return c;
}

}  // namespace ustrain
