#include "core/monitor/kept_peak.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "data/files/json_input.h"
#include "data/files/regular_file.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "unknown CPU";
}

// The kept entries; none when the file is missing or unusable (it is a cache, rewritten whole).
nlohmann::json read_entries(const std::string& path) {
  std::string text;
  try {
    text = read_regular_file(path);
  } catch (const UserError&) {
    return nlohmann::json::object();
  }
  nlohmann::json entries = parse_json_or_discarded(text);
  return entries.is_object() ? entries : nlohmann::json::object();
}

}  // namespace

std::string kept_peak_path() {
  const char* cache = std::getenv("XDG_CACHE_HOME");
  if (cache != nullptr && *cache != '\0') return std::string(cache) + "/ustrain/peak_flops.json";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.cache/ustrain/peak_flops.json";
  return "";
}

std::string peak_key(const std::string& backend_name) { return cpu_model() + " | " + backend_name; }

std::optional<KeptPeak> read_kept_peak(const std::string& path, const std::string& key) {
  if (path.empty()) return std::nullopt;
  const nlohmann::json entries = read_entries(path);
  const auto entry = entries.find(key);
  if (entry == entries.end() || !entry->is_object()) return std::nullopt;
  const nlohmann::json& flops = entry->value("flops_per_second", nlohmann::json());
  const nlohmann::json& at = entry->value("measured_at", nlohmann::json());
  if (!flops.is_number() || flops.get<double>() <= 0 || !at.is_string()) return std::nullopt;
  return KeptPeak{flops.get<double>(), at.get<std::string>()};
}

std::string keep_peak(const std::string& path, const std::string& key, const KeptPeak& peak) {
  if (path.empty()) return "neither XDG_CACHE_HOME nor HOME is set";
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return fmt::format("cannot create {}: {}", fs::path(path).parent_path().string(), ec.message());
  nlohmann::json entries = read_entries(path);
  entries[key] = {{"flops_per_second", peak.flops_per_second}, {"measured_at", peak.measured_at}};
  const std::string temporary = fmt::format("{}.{}.tmp", path, getpid());
  {
    std::ofstream out(temporary);
    out << entries.dump(2) << "\n";
    if (!out.flush()) {
      fs::remove(temporary, ec);
      return fmt::format("cannot write {}", temporary);
    }
  }
  fs::rename(temporary, path, ec);
  if (ec) {
    const std::string why = fmt::format("cannot replace {}: {}", path, ec.message());
    fs::remove(temporary, ec);
    return why;
  }
  return "";
}

}  // namespace ustrain
