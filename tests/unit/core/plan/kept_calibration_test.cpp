// A CPU's measured curves are kept per key, so that a run planning its own layout measures them
// once; a damaged or unwritable cache costs a measurement, never the run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/plan/kept_calibration.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

class KeptCalibrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ustrain_kept_calibration_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Curves whose GEMM rate is `rate`, counting the measurements.
  Calibration measured(double rate) {
    ++measurements_;
    Calibration c;
    c.gemm.points = {{1e6, rate}, {1e9, 2 * rate}};
    c.attention.points = {{1e6, rate / 2}};
    c.memory_bytes_per_s = 1e10;
    c.op_overhead_s = 1e-6;
    c.source = "measured by 1 rank(s)";
    return c;
  }
  fs::path dir_;
  int measurements_ = 0;
};

TEST_F(KeptCalibrationTest, MeasuresOncePerKey) {
  const Calibration first = kept_calibration(dir_.string(), "a", [&] { return measured(1e9); });
  EXPECT_NE(first.source.find("kept in " + dir_.string()), std::string::npos) << first.source;
  const Calibration again = kept_calibration(dir_.string(), "a", [&] { return measured(5e9); });
  EXPECT_EQ(measurements_, 1);
  EXPECT_EQ(again.gemm.points, first.gemm.points);
  EXPECT_EQ(again.memory_bytes_per_s, first.memory_bytes_per_s);
  kept_calibration(dir_.string(), "b", [&] { return measured(5e9); });
  EXPECT_EQ(measurements_, 2);
}

TEST_F(KeptCalibrationTest, ADamagedEntryIsMeasuredAgainAndReplaced) {
  kept_calibration(dir_.string(), "a", [&] { return measured(1e9); });
  for (const auto& entry : fs::directory_iterator(dir_)) std::ofstream(entry.path()) << "{\"gemm\": [";
  const Calibration c = kept_calibration(dir_.string(), "a", [&] { return measured(3e9); });
  EXPECT_EQ(measurements_, 2);
  EXPECT_EQ(c.gemm.points.front().second, 3e9);
  kept_calibration(dir_.string(), "a", [&] { return measured(7e9); });
  EXPECT_EQ(measurements_, 2);
}

TEST_F(KeptCalibrationTest, AnUnwritableDirectoryStillGivesTheMeasuredCurves) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  const std::string below_a_file = (dir_ / "file" / "cache").string();
  const Calibration c = kept_calibration(below_a_file, "a", [&] { return measured(1e9); });
  EXPECT_EQ(c.gemm.points.front().second, 1e9);
  EXPECT_NE(c.source.find("not kept"), std::string::npos) << c.source;
  kept_calibration("", "a", [&] { return measured(1e9); });
  EXPECT_EQ(measurements_, 2);
}

}  // namespace
}  // namespace ustrain
