// The run directory's train.log and run.json: a new start begins both, a resumed session
// appends to both, and a session's end (completed, stopped, an error) is recorded.
#include "core/run/run_record.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/run/build_info.h"
#include "parallel/comm/self_communicator.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class RunRecordTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ustrain_record_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  SessionStart session(bool fresh, const std::string& resumed_from = "") const {
    ProcessInfo launch;
    return SessionStart{dir_.string(), fresh, launch, resumed_from};
  }
  nlohmann::json json() const { return nlohmann::json::parse(read(dir_ / "run.json")); }

  fs::path dir_;
  SelfCommunicator world_{0, "world"};
};

TEST_F(RunRecordTest, ASessionIsRecordedFromStartToEnd) {
  {
    RunRecord record;
    record.start(session(true), world_, /*leads=*/true);
    const nlohmann::json running = json()["sessions"].back();
    EXPECT_EQ(running["status"], "running");
    EXPECT_TRUE(running["end_time"].is_null());
    spdlog::info("a line for the log");
    record.finish("completed", 30);
  }
  spdlog::info("a line after the session");
  const nlohmann::json j = json();
  EXPECT_EQ(j["run"], dir_.filename().string());
  ASSERT_EQ(j["sessions"].size(), 1u);
  const nlohmann::json& s = j["sessions"][0];
  EXPECT_EQ(s["ustrain_version"], build_version());
  EXPECT_EQ(s["build"]["git_commit"], build_git_commit());
  EXPECT_NE(std::string(build_git_commit()), "");
  EXPECT_FALSE(s["command_line"].empty());  // this test binary's own
  EXPECT_EQ(s["launcher"], "none");
  EXPECT_EQ(s["world_size"], 1);
  ASSERT_EQ(s["ranks"].size(), 1u);
  EXPECT_EQ(s["ranks"][0]["rank"], 0);
  EXPECT_EQ(s["ranks"][0]["pid"], ::getpid());
  EXPECT_FALSE(s["ranks"][0]["host"].get<std::string>().empty());
  EXPECT_TRUE(s["resumed_from"].is_null());
  EXPECT_EQ(s["status"], "completed");
  EXPECT_EQ(s["last_step"], 30);
  const std::string start = s["start_time"], end = s["end_time"];
  EXPECT_EQ(start.size(), 20u) << start;  // 2025-01-02T03:04:05Z
  EXPECT_LE(start, end);
  const std::string log = read(dir_ / "train.log");
  EXPECT_NE(log.find(" info a line for the log\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("a line after the session"), std::string::npos) << log;
}

TEST_F(RunRecordTest, AResumedSessionAppendsAndAFreshStartBeginsAgain) {
  {
    RunRecord first;
    first.start(session(true), world_, true);
    spdlog::info("first session");
    first.finish("stopped by SIGTERM", 10);
  }
  {
    RunRecord second;
    second.start(session(false, "runs/x/checkpoints/step-00000010"), world_, true);
    spdlog::info("second session");
    second.finish("error", -1, "training stopped at step 12: something");
  }
  nlohmann::json j = json();
  ASSERT_EQ(j["sessions"].size(), 2u);
  EXPECT_EQ(j["sessions"][0]["status"], "stopped by SIGTERM");
  EXPECT_EQ(j["sessions"][1]["resumed_from"], "runs/x/checkpoints/step-00000010");
  EXPECT_EQ(j["sessions"][1]["status"], "error");
  EXPECT_EQ(j["sessions"][1]["error"], "training stopped at step 12: something");
  EXPECT_TRUE(j["sessions"][1]["last_step"].is_null());
  std::string log = read(dir_ / "train.log");
  EXPECT_LT(log.find("first session"), log.find("second session")) << log;
  // The error reaches the log file, which the console does not show twice.
  EXPECT_NE(log.find(" error training stopped at step 12: something"), std::string::npos) << log;
  {
    RunRecord fresh;
    fresh.start(session(true), world_, true);
    fresh.finish("completed", 5);
  }
  j = json();
  EXPECT_EQ(j["sessions"].size(), 1u);
  log = read(dir_ / "train.log");
  EXPECT_EQ(log.find("first session"), std::string::npos) << log;
}

TEST_F(RunRecordTest, OtherRanksAndUnstartedRecordsWriteNothing) {
  {
    RunRecord record;
    record.finish("error", -1, "before the start");  // nothing to record yet
    RunRecord other;
    other.start(session(true), world_, /*leads=*/false);
    other.finish("completed", 3);
  }
  EXPECT_FALSE(fs::exists(dir_ / "run.json"));
  EXPECT_FALSE(fs::exists(dir_ / "train.log"));
}

TEST_F(RunRecordTest, AnUnreadableRecordIsStartedAgain) {
  std::ofstream(dir_ / "run.json") << "{ not json";
  RunRecord record;
  record.start(session(false), world_, true);
  record.finish("completed", 1);
  EXPECT_EQ(json()["sessions"].size(), 1u);
}

}  // namespace
}  // namespace ustrain
