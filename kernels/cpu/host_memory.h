// How much host memory this process could still use, for checking a memory plan before it is
// allocated: Linux overcommits, so an allocation larger than the memory left succeeds and the
// process is killed later, while its pages are first touched.
#pragma once

#include <cstddef>
#include <string>

namespace ustrain {

// The kernel's estimate of memory available without swapping (MemAvailable in
// PROC_ROOT/meminfo), lowered to what the memory limits of this process's control group and its
// ancestors leave (cgroup v2 memory.max less memory.current; v1 memory.limit_in_bytes less
// memory.usage_in_bytes, under CGROUP_ROOT/memory): a Slurm job's or a container's limit. The
// usage counts the job's file cache, which is reclaimed before the kernel kills (memory.stat's
// active_file and inactive_file; v1 total_active_file and total_inactive_file), so it does not
// count as used.
// 0 when neither can be read; at least 1 otherwise. The roots are parameters for tests.
std::size_t host_available_bytes(const std::string& proc_root = "/proc",
                                 const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace ustrain
