// The host memory a job may use, read from copies of /proc and /sys/fs/cgroup, and the memory
// plan held against it.
#include "core/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ustrain {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

class HostMemoryFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "ustrain_host_memory_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    write("proc/meminfo", "MemTotal:       32000000 kB\nMemAvailable:    8388608 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + path).parent_path());
    std::ofstream(root_ + "/" + path) << text;
  }
  std::optional<HostMemory> read() { return host_memory(root_ + "/proc", root_ + "/cgroup"); }
  std::string root_;
};

TEST_F(HostMemoryFiles, CgroupV2TakesTheSmallestLimitOnTheWayToTheRoot) {
  write("proc/self/cgroup", "0::/slurm/job_7/step_0\n");
  write("cgroup/slurm/job_7/step_0/memory.max", "max\n");
  write("cgroup/slurm/job_7/memory.max", "1073741824\n");
  write("cgroup/slurm/memory.max", "4294967296\n");
  const std::optional<HostMemory> m = read();
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->limited);
  EXPECT_EQ(m->bytes, kGiB);
  EXPECT_NE(m->source.find("cgroup/slurm/job_7/memory.max"), std::string::npos) << m->source;
}

TEST_F(HostMemoryFiles, CgroupV1MemoryControllerAndItsUnlimitedValue) {
  write("proc/self/cgroup", "9:pids:/x\n4:memory,foo:/job/one\n0::/\n");
  write("cgroup/memory/job/one/memory.limit_in_bytes", "2147483648\n");
  write("cgroup/memory/job/memory.limit_in_bytes", "9223372036854771712\n");
  const std::optional<HostMemory> m = read();
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->limited);
  EXPECT_EQ(m->bytes, 2 * kGiB);
}

TEST_F(HostMemoryFiles, WithoutALimitTheAvailableMemory) {
  write("proc/self/cgroup", "0::/user.slice\n");
  write("cgroup/user.slice/memory.max", "max\n");
  const std::optional<HostMemory> m = read();
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->limited);
  EXPECT_EQ(m->bytes, 8 * kGiB);
  EXPECT_NE(m->source.find("MemAvailable"), std::string::npos);
}

TEST(FitPlan, RefusesAPlanOverTheLimitWithTheNumbers) {
  const HostMemory cgroup{kGiB, true, "the memory cgroup limit (memory.max)"};
  const MemoryFit over = fit_plan(2 * kGiB + kGiB / 10, 1, cgroup);
  EXPECT_FALSE(over.fits);
  for (const char* part : {"the memory plan needs 2.10 GiB", "more than the 1.00 GiB of the memory cgroup limit",
                           "--mem"})
    EXPECT_NE(over.message.find(part), std::string::npos) << over.message;
  // Four processes on the node share the limit.
  const MemoryFit shared = fit_plan(kGiB / 2, 4, HostMemory{kGiB * 3 / 2, true, "L"});
  EXPECT_FALSE(shared.fits);
  EXPECT_NE(shared.message.find("the 4 processes on this node need 4 x 512.00 MiB = 2.00 GiB"), std::string::npos)
      << shared.message;
}

TEST(FitPlan, WarnsWithinTenPercentAndPassesBelow) {
  const HostMemory cgroup{kGiB, true, "L"};
  const MemoryFit tight = fit_plan(kGiB * 95 / 100, 1, cgroup);
  EXPECT_TRUE(tight.fits);
  EXPECT_TRUE(tight.tight);
  EXPECT_NE(tight.message.find("within 10%"), std::string::npos) << tight.message;
  const MemoryFit roomy = fit_plan(kGiB / 2, 1, cgroup);
  EXPECT_TRUE(roomy.fits);
  EXPECT_FALSE(roomy.tight);
}

// Available memory is taken by the processes one after the other: each must fit on its own.
TEST(FitPlan, AvailableMemoryHoldsEachProcessOnItsOwn) {
  const HostMemory available{kGiB, false, "A"};
  EXPECT_TRUE(fit_plan(kGiB / 2, 4, available).fits);
  EXPECT_TRUE(fit_plan(kGiB / 2, 4, available).tight);
  const MemoryFit over = fit_plan(2 * kGiB, 4, available);
  EXPECT_FALSE(over.fits);
  EXPECT_NE(over.message.find("the memory plan of this process needs 2.00 GiB"), std::string::npos) << over.message;
}

}  // namespace
}  // namespace ustrain
