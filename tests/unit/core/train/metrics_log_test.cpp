// The metrics log (core/train/metrics_log.h) and resident-memory readings.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/train/metrics_log.h"
#include "core/run/resource_usage.h"
#include "kernels/byte_text.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A fresh directory under the test temp dir.
std::string scratch_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

LogSection jsonl_only() {
  LogSection log;
  log.tensorboard = false;
  return log;
}

TEST(MetricsLog, LinesParseBackInOrderWithExactValues) {
  const std::string dir = scratch_dir("ustrain_metrics_log_test");
  const std::string path = dir + "/metrics.jsonl";
  const double before = std::chrono::duration<double>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  {
    MetricsLog log(dir, jsonl_only(), std::nullopt);
    EXPECT_EQ(log.files(), path);
    log.write("train", {{"step", 10}, {"loss", 2.718281828459045}, {"lr", 3e-4},
                        {"grad_norm", std::numeric_limits<double>::quiet_NaN()},
                        {"tokens_per_s", std::numeric_limits<double>::infinity()}});
    log.write("eval", {{"step", 20}, {"loss", 0.1 + 0.2}});
  }
  {
    MetricsLog resumed(dir, jsonl_only(), 20);  // reopening appends rather than truncating
    resumed.write("train", {{"step", 21}});
  }
  const double after = std::chrono::duration<double>(
                           std::chrono::system_clock::now().time_since_epoch()).count();

  const std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  const auto first = nlohmann::ordered_json::parse(lines[0]);
  std::vector<std::string> keys;
  for (const auto& item : first.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"kind", "step", "loss", "lr", "grad_norm",
                                            "tokens_per_s", "time"}));
  EXPECT_EQ(first["kind"], "train");
  EXPECT_TRUE(first["step"].is_number_integer());
  EXPECT_EQ(first["step"].get<std::int64_t>(), 10);
  EXPECT_EQ(first["loss"].get<double>(), 2.718281828459045);
  EXPECT_EQ(first["lr"].get<double>(), 3e-4);
  EXPECT_TRUE(first["grad_norm"].is_null());
  EXPECT_TRUE(first["tokens_per_s"].is_null());
  EXPECT_GE(first["time"].get<double>(), before - 1);
  EXPECT_LE(first["time"].get<double>(), after + 1);

  const auto second = nlohmann::ordered_json::parse(lines[1]);
  EXPECT_EQ(second["kind"], "eval");
  EXPECT_EQ(second["loss"].get<double>(), 0.1 + 0.2);  // every bit of the double survives
  const auto third = nlohmann::ordered_json::parse(lines[2]);
  EXPECT_EQ(third["step"].get<std::int64_t>(), 21);
  std::filesystem::remove_all(dir);
}

// GB where it reads as more than zeros; below 0.01 GB the binary units of format_bytes.
TEST(FormatGigabytes, SmallSizesInMibKibOrBytes) {
  EXPECT_EQ(format_gigabytes(2.5e9), "2.50 GB");
  EXPECT_EQ(format_gigabytes(1.0e7), "0.01 GB");
  EXPECT_EQ(format_gigabytes(1.5e9, 3), "1.500 GB");
  EXPECT_EQ(format_gigabytes(5.0 * 1024 * 1024), "5.00 MiB");
  EXPECT_EQ(format_gigabytes(1536), "1.5 KiB");
  EXPECT_EQ(format_gigabytes(0), "0 B");
}

// A run that fails before its first step must leave no metrics.jsonl: the next start would
// take the directory for one that holds a run.
TEST(MetricsLog, NoFileBeforeTheFirstRow) {
  const std::string dir = ::testing::TempDir() + "ustrain_metrics_first_row";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/metrics.jsonl";
  std::filesystem::remove(path);
  {
    MetricsLog log(dir, jsonl_only(), std::nullopt);
    log.sync();
    EXPECT_FALSE(std::filesystem::exists(path));
    log.write("train", {{"step", 1}});
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  std::filesystem::remove_all(dir);
}

TEST(MetricsLog, UnopenablePathIsAUserErrorNamingIt) {
  const std::string dir = ::testing::TempDir() + "no_such_dir_for_ustrain";
  const std::string path = dir + "/metrics.jsonl";
  MetricsLog log(dir, jsonl_only(), std::nullopt);  // the file opens with the first row
  try {
    log.write("train", {{"step", 1}});
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

std::vector<std::string> event_files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) names.push_back(entry.path());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(MetricsLog, ResumingAddsAnEventFileAndANewStartRemovesThem) {
  const std::string dir = scratch_dir("ustrain_metrics_log_events_test");
  LogSection both;
  {
    MetricsLog log(dir, both, std::nullopt);
    log.write("train", {{"step", 1}, {"loss", 5.0}});
    const auto files = event_files_in(dir);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(log.files(), dir + "/metrics.jsonl, " + files[0]);
  }
  { MetricsLog resumed(dir, both, 1); }
  EXPECT_EQ(event_files_in(dir).size(), 2u) << "a resumed run keeps the earlier event files";
  LogSection neither;
  neither.jsonl = neither.tensorboard = false;
  {
    MetricsLog fresh(dir, neither, std::nullopt);
    EXPECT_EQ(fresh.files(), "");
    fresh.write("train", {{"step", 1}, {"loss", 4.0}});
  }
  EXPECT_TRUE(event_files_in(dir).empty()) << "a new start leaves no event file of the earlier run";
  EXPECT_EQ(read_lines(dir + "/metrics.jsonl").size(), 1u) << "log.jsonl = false writes no line";
  std::filesystem::remove_all(dir);
}

TEST(ResourceUsage, TouchingMemoryRaisesTheResidentSize) {
  const std::size_t before = current_resident_bytes();
  ASSERT_GT(before, 0u) << "/proc/self/status should report VmRSS on Linux";
  const std::size_t bytes = std::size_t{64} << 20;
  std::vector<unsigned char> block(bytes);
  // Publishing the pointer through a volatile keeps the allocation and its writes alive.
  unsigned char* volatile published = block.data();
  for (std::size_t i = 0; i < bytes; ++i) published[i] = static_cast<unsigned char>(i | 1);
  const std::size_t after = current_resident_bytes();
  EXPECT_GE(after, before + (std::size_t{60} << 20));
  EXPECT_GE(peak_resident_bytes(), after);
  EXPECT_EQ(block[12345], static_cast<unsigned char>(12345 | 1));
}

}  // namespace
}  // namespace ustrain
