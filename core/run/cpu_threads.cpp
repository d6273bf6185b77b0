#include "core/run/cpu_threads.h"

#include <fmt/format.h>
#include <sched.h>

#include <thread>

namespace ustrain {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadCheck check_threads(std::int64_t requested, int cores) {
  ThreadCheck check;
  if (requested <= cores) return check;
  const std::string where = fmt::format("device.threads = {}, but this process may run on {} core{}", requested, cores,
                                        cores == 1 ? "" : "s");
  if (requested > std::int64_t{kMaxThreadsPerCore} * cores)
    check.error = fmt::format("{}; more than {} threads per core only make every step slower; set device.threads to "
                              "at most {} (or 0 for all cores)",
                              where, kMaxThreadsPerCore, cores);
  else
    check.warning = fmt::format("{}: the threads take turns on the cores and steps run slower; device.threads = {} "
                                "(or 0) uses each core once",
                                where, cores);
  return check;
}

}  // namespace ustrain
