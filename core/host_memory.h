// The host memory a process may use, held against the memory plan before anything is
// allocated: a plan larger than a job's memory cgroup (Slurm's --mem) is otherwise killed by
// the kernel seconds into the run with no message at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ustrain {

struct HostMemory {
  std::uint64_t bytes = 0;
  // True: a memory cgroup's limit, shared by every process of the job on this node. False:
  // the memory the kernel says is available now (MemAvailable), which the job's processes
  // take from one after the other.
  bool limited = false;
  std::string source;  // for messages: where the figure comes from
};

// The smallest memory cgroup limit on the way from this process's cgroup to the root (v2
// memory.max, else v1 memory.limit_in_bytes), else MemAvailable; nullopt when neither can be
// read. `proc` and `cgroup_root` are /proc and /sys/fs/cgroup, or a copy of them in tests.
std::optional<HostMemory> host_memory(const std::string& proc = "/proc",
                                      const std::string& cgroup_root = "/sys/fs/cgroup");

struct MemoryFit {
  bool fits = true;
  bool tight = false;   // fits, within 10%
  std::string message;  // for either
};

// `plan_bytes` per process, `processes` of the job on this node. A cgroup limit must hold
// them all; without one, each process's plan must fit in what is available now, and all of
// them together are warned about.
MemoryFit fit_plan(std::uint64_t plan_bytes, int processes, const HostMemory& memory);

// fit_plan against host_memory(): UserError when the plan does not fit, a warning when tight.
void check_host_memory(std::uint64_t plan_bytes, int processes);

}  // namespace ustrain
