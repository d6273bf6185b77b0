#include "core/host_memory.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "kernels/error.h"
#include "kernels/tensor.h"

namespace ustrain {
namespace {

// Limits this large mean "none" (v1 writes PAGE_COUNTER_MAX rounded to pages).
constexpr std::uint64_t kUnlimited = std::uint64_t{1} << 60;

std::optional<std::uint64_t> read_limit(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  if (word == "max") return kUnlimited;
  try {
    std::size_t used = 0;
    const std::uint64_t v = std::stoull(word, &used);
    if (used != word.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The smallest `file` limit in `root`/`path` and its ancestors up to `root`.
std::optional<HostMemory> smallest_limit(const std::string& root, std::string path, const std::string& file) {
  std::optional<HostMemory> best;
  for (;;) {
    const std::string at = root + (path == "/" ? "" : path) + "/" + file;
    if (const std::optional<std::uint64_t> v = read_limit(at); v && *v < kUnlimited && (!best || *v < best->bytes))
      best = HostMemory{*v, true, fmt::format("the memory cgroup limit ({})", at)};
    if (path == "/" || path.empty()) break;
    const std::size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

std::optional<HostMemory> available(const std::string& proc) {
  std::ifstream in(proc + "/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    std::uint64_t kib = 0;
    if (fields >> name >> kib && name == "MemAvailable:")
      return HostMemory{kib * 1024, false, "the memory available on this machine (MemAvailable in /proc/meminfo)"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<HostMemory> host_memory(const std::string& proc, const std::string& cgroup_root) {
  // Lines "ID:CONTROLLERS:PATH": "0::PATH" for v2, "N:memory:PATH" (among others) for v1.
  std::ifstream in(proc + "/self/cgroup");
  std::string line;
  std::optional<HostMemory> limit;
  while (std::getline(in, line) && !limit) {
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      limit = smallest_limit(cgroup_root, path, "memory.max");
    } else {
      std::istringstream names(controllers);
      std::string name;
      while (std::getline(names, name, ','))
        if (name == "memory") limit = smallest_limit(cgroup_root + "/memory", path, "memory.limit_in_bytes");
    }
  }
  if (limit) return limit;
  return available(proc);
}

MemoryFit fit_plan(std::uint64_t plan_bytes, int processes, const HostMemory& memory) {
  const std::uint64_t all = plan_bytes * static_cast<std::uint64_t>(processes);
  const std::string everyone =
      processes == 1 ? fmt::format("the memory plan needs {}", format_bytes(plan_bytes))
                     : fmt::format("the memory plans of the {} processes on this node need {} x {} = {}", processes,
                                   processes, format_bytes(plan_bytes), format_bytes(all));
  // A limit holds the whole job on this node; available memory is taken by each in turn.
  const bool over = memory.limited ? all > memory.bytes : plan_bytes > memory.bytes;
  const std::string subject =
      memory.limited || processes == 1 ? everyone
                                       : fmt::format("the memory plan of this process needs {}", format_bytes(plan_bytes));
  MemoryFit fit;
  if (over) {
    fit.fits = false;
    fit.message = fmt::format("{}, more than the {} of {}; lower train.micro_batch or the model's sizes, recompute "
                              "activations (train.recompute = \"full\"), shard the training state (parallel.zero), "
                              "or ask for more memory (Slurm: --mem)",
                              subject, format_bytes(memory.bytes), memory.source);
  } else if (static_cast<double>(all) > 0.9 * static_cast<double>(memory.bytes)) {
    fit.tight = true;
    fit.message = fmt::format("{}, within 10% of the {} of {}; code, libraries, the data in memory and BLAS buffers "
                              "come on top, so the job may run out of memory",
                              everyone, format_bytes(memory.bytes), memory.source);
  }
  return fit;
}

void check_host_memory(std::uint64_t plan_bytes, int processes) {
  const std::optional<HostMemory> memory = host_memory();
  if (!memory) return;
  const MemoryFit fit = fit_plan(plan_bytes, processes, *memory);
  if (!fit.fits) throw UserError(fit.message);
  if (fit.tight) spdlog::warn("{}", fit.message);
}

}  // namespace ustrain
