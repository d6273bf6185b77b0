// device.threads against the cores this process may run on. Threads beyond the cores take
// turns on them and every step slows down (1000 threads on 2 cores: 48 s per step), and an
// absurd count crashes inside the OpenMP runtime; both are caught before the backend starts.
#pragma once

#include <cstdint>
#include <string>

namespace ustrain {

// More threads than this per core are refused.
inline constexpr int kMaxThreadsPerCore = 4;

// The cores in this process's CPU affinity mask (what Slurm, taskset or a cpuset allow).
int usable_cores();

struct ThreadCheck {
  std::string error;    // non-empty: refuse with this message
  std::string warning;  // non-empty: go on, but say this
};

// `requested` is device.threads (0: all cores, always fine).
ThreadCheck check_threads(std::int64_t requested, int cores);

}  // namespace ustrain
