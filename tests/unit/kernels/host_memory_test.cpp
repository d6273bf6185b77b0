// The host memory a process may still use: MemAvailable, lowered by the cgroup v1 and v2 limits
// of the process's group and its ancestors, less their usage without reclaimable file cache.
// Read from fake /proc and /sys/fs/cgroup trees.
#include "kernels/cpu/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ustrain {
namespace {

namespace fs = std::filesystem;

class HostMemory : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ustrain_host_memory_" + std::to_string(::getpid()) + "_" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(proc() + "/self");
    fs::create_directories(cgroup() + "/job/step");
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string proc() const { return (root_ / "proc").string(); }
  std::string cgroup() const { return (root_ / "cgroup").string(); }
  static void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  fs::path root_;
};

TEST_F(HostMemory, MemAvailableWithoutLimits) {
  write(proc() + "/meminfo", "MemTotal:       32000000 kB\nMemFree:  1000 kB\nMemAvailable:   20000000 kB\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{20000000} * 1024);
  write(proc() + "/self/cgroup", "0::/job/step\n");
  write(cgroup() + "/job/step/memory.max", "max\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{20000000} * 1024);
}

TEST_F(HostMemory, TheTightestCgroupLimitWins) {
  write(proc() + "/meminfo", "MemAvailable:   20000000 kB\n");
  write(proc() + "/self/cgroup", "0::/job/step\n");
  write(cgroup() + "/job/step/memory.max", "max\n");
  write(cgroup() + "/job/memory.max", "8000000000\n");  // the job's limit, on the parent
  write(cgroup() + "/job/memory.current", "3000000000\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{5000000000});
  write(cgroup() + "/job/step/memory.max", "4000000000\n");
  write(cgroup() + "/job/step/memory.current", "1000000000\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{3000000000});
  write(cgroup() + "/job/step/memory.current", "5000000000\n");  // over its limit already
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), 1u);             // known, and nothing fits
}

TEST_F(HostMemory, CgroupV1MemoryControllerLimitsToo) {
  write(proc() + "/meminfo", "MemAvailable:   20000000 kB\n");
  write(proc() + "/self/cgroup", "5:cpu,cpuacct:/slurm/job_7\n4:memory:/slurm/job_7/step_0\n0::/\n");
  fs::create_directories(cgroup() + "/memory/slurm/job_7/step_0");
  write(cgroup() + "/memory/slurm/job_7/step_0/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{20000000} * 1024);
  write(cgroup() + "/memory/slurm/job_7/memory.limit_in_bytes", "6000000000\n");
  write(cgroup() + "/memory/slurm/job_7/memory.usage_in_bytes", "2000000000\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{4000000000});
}

// A job that copied its dataset holds page cache in its cgroup: it is reclaimed before the
// kernel kills, so it is not counted as used (cgroup v2: inactive_file and active_file).
TEST_F(HostMemory, FileCacheIsNotUsedV2) {
  write(proc() + "/meminfo", "MemAvailable:   20000000 kB\n");
  write(proc() + "/self/cgroup", "0::/job/step\n");
  write(cgroup() + "/job/memory.max", "1000000000\n");
  write(cgroup() + "/job/memory.current", "999900000\n");  // nearly full, mostly file cache
  write(cgroup() + "/job/memory.stat", "anon 100000000\nfile 899000000\nactive_file 100000000\n"
                                       "inactive_file 799900000\nslab 1000\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{900000000});
  write(cgroup() + "/job/memory.stat", "inactive_file 2000000000\n");  // more than the usage: all free
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{1000000000});
}

// A file read several times moves to the active list: a 1 GiB group that read 900 MB three
// times holds ~850 MB of active file cache, which the kernel still reclaims before it kills.
TEST_F(HostMemory, ActiveFileCacheIsNotUsedEither) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  write(proc() + "/meminfo", "MemAvailable:   20000000 kB\n");
  write(proc() + "/self/cgroup", "0::/job\n");
  write(cgroup() + "/job/memory.max", std::to_string(1024 * kMiB) + "\n");
  write(cgroup() + "/job/memory.current", std::to_string(929 * kMiB) + "\n");
  write(cgroup() + "/job/memory.stat", "anon " + std::to_string(20 * kMiB) + "\nactive_file " +
                                           std::to_string(858 * kMiB) + "\ninactive_file " +
                                           std::to_string(51 * kMiB) + "\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), 1004 * kMiB);  // the limit less the 20 MiB not file cache
}

// cgroup v1: total_active_file and total_inactive_file count the group and its children, as
// memory.usage_in_bytes does; active_file and inactive_file (the group's own pages) are not the
// ones to take.
TEST_F(HostMemory, FileCacheIsNotUsedV1) {
  write(proc() + "/meminfo", "MemAvailable:   20000000 kB\n");
  write(proc() + "/self/cgroup", "4:memory:/slurm/job_7\n0::/\n");
  fs::create_directories(cgroup() + "/memory/slurm/job_7");
  write(cgroup() + "/memory/slurm/job_7/memory.limit_in_bytes", "6000000000\n");
  write(cgroup() + "/memory/slurm/job_7/memory.usage_in_bytes", "5999000000\n");
  write(cgroup() + "/memory/slurm/job_7/memory.stat",
        "cache 5000000000\nactive_file 20\ninactive_file 10\ntotal_cache 5000000000\ntotal_active_file 500000000\n"
        "total_inactive_file 4000000000\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), std::size_t{4501000000});
}

TEST_F(HostMemory, UnknownIsZero) {
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), 0u);
  write(proc() + "/self/cgroup", "0::/job/step\n");
  write(cgroup() + "/job/memory.max", "6000\n");
  EXPECT_EQ(host_available_bytes(proc(), cgroup()), 6000u);  // the limit alone
}

TEST(HostMemoryHere, ThisMachineReportsSomething) {
  EXPECT_GT(host_available_bytes(), 0u);
}

}  // namespace
}  // namespace ustrain
