// The CPU's peak FLOP/s for MFU, measured once per CPU model and thread count and kept in a
// file: read back, measured again on request, and still measured when it cannot be kept.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/monitor/kept_peak.h"
#include "core/monitor/peak_flops.h"
#include "kernels/backend.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

class KeptPeakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ustrain_kept_peak_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    path_ = (dir_ / "ustrain" / "peak_flops.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(KeptPeakTest, KeepsOneEntryPerKey) {
  EXPECT_FALSE(read_kept_peak(path_, "a").has_value());
  ASSERT_EQ(keep_peak(path_, "a", {1e9, "2026-01-02T03:04:05Z"}), "");  // creates the directory
  ASSERT_EQ(keep_peak(path_, "b", {2e9, "2026-01-03T00:00:00Z"}), "");
  ASSERT_EQ(keep_peak(path_, "a", {3e9, "2026-01-04T00:00:00Z"}), "");  // replaces a, keeps b
  const auto a = read_kept_peak(path_, "a"), b = read_kept_peak(path_, "b");
  ASSERT_TRUE(a && b);
  EXPECT_DOUBLE_EQ(a->flops_per_second, 3e9);
  EXPECT_EQ(a->measured_at, "2026-01-04T00:00:00Z");
  EXPECT_DOUBLE_EQ(b->flops_per_second, 2e9);
  EXPECT_FALSE(read_kept_peak(path_, "c").has_value());
  EXPECT_FALSE(read_kept_peak("", "a").has_value());
}

TEST_F(KeptPeakTest, ADamagedFileIsMeasuredAgainAndReplaced) {
  fs::create_directories(fs::path(path_).parent_path());
  std::ofstream(path_) << "{ not json";
  EXPECT_FALSE(read_kept_peak(path_, "a").has_value());
  std::ofstream(path_) << R"({"a": {"flops_per_second": -1, "measured_at": "x"}})";
  EXPECT_FALSE(read_kept_peak(path_, "a").has_value());
  ASSERT_EQ(keep_peak(path_, "a", {1e9, "2026-01-02T03:04:05Z"}), "");
  EXPECT_TRUE(read_kept_peak(path_, "a").has_value());
}

TEST_F(KeptPeakTest, AnUnwritablePlaceSaysWhy) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "ustrain") << "a file where the directory would be";
  EXPECT_NE(keep_peak(path_, "a", {1e9, "now"}).find("cannot create"), std::string::npos);
  EXPECT_NE(keep_peak("", "a", {1e9, "now"}), "");
}

TEST_F(KeptPeakTest, TheKeyNamesTheBackendAndItsThreads) {
  const std::string key = peak_key("cpu (2 threads)");
  EXPECT_NE(key.find(" | cpu (2 threads)"), std::string::npos) << key;
  EXPECT_NE(key, peak_key("cpu (4 threads)"));
}

TEST_F(KeptPeakTest, TheCpuPeakIsMeasuredOnceAndKept) {
  std::unique_ptr<Backend> cpu = make_backend(Device::cpu, 1);
  const PeakFlops first = device_peak_flops(*cpu, DType::f32, {path_, false});
  EXPECT_GT(first.flops_per_second, 0);
  EXPECT_NE(first.source.find("measured now and kept in " + path_), std::string::npos) << first.source;
  const auto kept = read_kept_peak(path_, peak_key(cpu->name()));
  ASSERT_TRUE(kept.has_value());
  EXPECT_DOUBLE_EQ(kept->flops_per_second, first.flops_per_second);

  // A value no measurement gives: the next run takes it from the file, measuring nothing.
  ASSERT_EQ(keep_peak(path_, peak_key(cpu->name()), {1234.5, "2026-01-02T03:04:05Z"}), "");
  const PeakFlops again = device_peak_flops(*cpu, DType::f32, {path_, false});
  EXPECT_DOUBLE_EQ(again.flops_per_second, 1234.5);
  EXPECT_NE(again.source.find("measured 2026-01-02T03:04:05Z and kept in " + path_), std::string::npos)
      << again.source;

  // On request it is measured again and the new value kept.
  const PeakFlops remeasured = device_peak_flops(*cpu, DType::f32, {path_, true});
  EXPECT_GT(remeasured.flops_per_second, 1e6);
  EXPECT_NE(remeasured.source.find("measured now"), std::string::npos) << remeasured.source;
  EXPECT_DOUBLE_EQ(read_kept_peak(path_, peak_key(cpu->name()))->flops_per_second, remeasured.flops_per_second);
}

TEST_F(KeptPeakTest, APeakThatCannotBeKeptIsStillMeasured) {
  std::unique_ptr<Backend> cpu = make_backend(Device::cpu, 1);
  fs::create_directories(dir_);
  std::ofstream(dir_ / "ustrain") << "a file where the directory would be";
  const PeakFlops peak = device_peak_flops(*cpu, DType::f32, {path_, false});
  EXPECT_GT(peak.flops_per_second, 0);
  EXPECT_NE(peak.source.find("measured now (not kept: cannot create"), std::string::npos) << peak.source;
  const PeakFlops nowhere = device_peak_flops(*cpu, DType::f32, {"", false});
  EXPECT_GT(nowhere.flops_per_second, 0);
  EXPECT_NE(nowhere.source.find("not kept"), std::string::npos) << nowhere.source;
}

}  // namespace
}  // namespace ustrain
