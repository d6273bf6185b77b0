#include "kernels/cpu/host_memory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>

namespace ustrain {
namespace {

// "MemAvailable:   12345 kB" in bytes.
std::optional<std::size_t> meminfo_available(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream rest(line.substr(13));
    std::size_t kib = 0;
    std::string unit;
    if (rest >> kib >> unit && unit == "kB") return kib * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

// A cgroup file holding one number ("max" or unreadable: nullopt).
std::optional<std::size_t> number_in(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::size_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// This process's cgroup path for a hierarchy: cgroup v2's ("0::/user.slice/job.scope") when
// `controller` is empty, else the v1 hierarchy holding it ("4:memory:/slurm/job_7").
std::optional<std::string> cgroup_path(const std::string& proc_root, const std::string& controller) {
  std::ifstream in(proc_root + "/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const std::size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    // ",cpu,cpuacct," holds ",cpu," (appended piecewise: GCC 12 warns falsely about "," + s + ",").
    std::string controllers(1, ',');
    controllers.append(line, first + 1, second - first - 1).push_back(',');
    std::string wanted(1, ',');
    wanted.append(controller).push_back(',');
    const bool match = controller.empty() ? controllers == ",," : controllers.find(wanted) != std::string::npos;
    if (match) return line.substr(second + 1);
  }
  return std::nullopt;
}

// The sum of the values of `keys` in a memory.stat file ("inactive_file 123" lines); a key
// that is absent counts 0.
std::size_t stat_sum(const std::filesystem::path& path, std::initializer_list<std::string_view> keys) {
  std::ifstream in(path);
  std::string name;
  std::size_t value = 0, sum = 0;
  while (in >> name >> value)
    if (std::find(keys.begin(), keys.end(), name) != keys.end()) sum += value;
  return sum;
}

// The files of one cgroup hierarchy's memory controller: its limit, its usage, and the keys of
// memory.stat that count its file cache on the active and the inactive list. Both are
// reclaimed before the kernel kills (the active list is only aged to the inactive one first),
// as the kernel's own MemAvailable counts them.
struct CgroupFiles {
  const char* limit;
  const char* usage;
  std::string_view active_file, inactive_file;
};

// The least memory any limit leaves on the way from this process's group up to `root` of its
// hierarchy; at least 1 when a limit is known (0 means unknown). Usage counts the page cache
// of files the job read or wrote; that is reclaimable, so it is not counted as used.
std::optional<std::size_t> least_left(const std::filesystem::path& root, const std::string& group,
                                      const CgroupFiles& files) {
  std::optional<std::size_t> least;
  std::filesystem::path dir = root / std::filesystem::path(group).relative_path();
  for (;;) {
    const std::optional<std::size_t> limit = number_in(dir / files.limit);
    if (limit) {
      const std::size_t usage = number_in(dir / files.usage).value_or(0);
      const std::size_t reclaimable = stat_sum(dir / "memory.stat", {files.active_file, files.inactive_file});
      const std::size_t used = usage > reclaimable ? usage - reclaimable : 0;
      const std::size_t left = *limit > used ? *limit - used : 1;
      least = least ? std::min(*least, left) : left;
    }
    if (dir == root || !dir.has_relative_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return least;
}

// What the cgroup v2 limits (memory.max) and the v1 memory controller's
// (memory.limit_in_bytes) leave.
std::optional<std::size_t> cgroup_left(const std::string& proc_root, const std::string& cgroup_root) {
  std::optional<std::size_t> least;
  const auto take = [&](std::optional<std::size_t> left) {
    if (left) least = least ? std::min(*least, *left) : *left;
  };
  if (const std::optional<std::string> v2 = cgroup_path(proc_root, ""))
    take(least_left(cgroup_root, *v2, {"memory.max", "memory.current", "active_file", "inactive_file"}));
  if (const std::optional<std::string> v1 = cgroup_path(proc_root, "memory"))
    take(least_left(std::filesystem::path(cgroup_root) / "memory", *v1,
                    {"memory.limit_in_bytes", "memory.usage_in_bytes", "total_active_file", "total_inactive_file"}));
  return least;
}

}  // namespace

std::size_t host_available_bytes(const std::string& proc_root, const std::string& cgroup_root) {
  const std::optional<std::size_t> available = meminfo_available(proc_root + "/meminfo");
  const std::optional<std::size_t> left = cgroup_left(proc_root, cgroup_root);
  if (available && left) return std::min(*available, *left);
  return available.value_or(left.value_or(0));
}

}  // namespace ustrain
