// The run directory's lock: one trainer at a time, the second refused with the holder's host
// and pid, and the lock free again as soon as its holder is gone, however it went.
#include "core/run/run_lock.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/run/run_start.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& tag) {
  const std::string dir = ::testing::TempDir() + "ustrain_run_lock_" + std::to_string(::getpid()) + "_" + tag;
  fs::remove_all(dir);
  return dir + "/runs/tiny";  // not yet there: the lock creates it
}

std::string refusal(const std::string& dir) {
  try {
    RunLock second(dir);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "a second lock on " << dir << " was granted";
  return "";
}

TEST(RunLock, SecondHolderIsRefusedWithTheFirstOnesHostAndPid) {
  const std::string dir = fresh_dir("second");
  std::string message;
  {
    RunLock first(dir);
    EXPECT_TRUE(fs::is_regular_file(dir + "/run.lock"));
    message = refusal(dir);
  }
  EXPECT_NE(message.find("run directory " + dir + " is in use by another trainer"), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
  EXPECT_NE(message.find("host "), std::string::npos) << message;
  EXPECT_NO_THROW(RunLock again(dir));  // released with its holder
}

TEST(RunLock, IsReleasedWhenItsHolderIsKilled) {
  const std::string dir = fresh_dir("killed");
  fs::create_directories(dir);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunLock held(dir);
    const char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  const std::string message = refusal(dir);
  EXPECT_NE(message.find("pid " + std::to_string(child)), std::string::npos) << message;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_NO_THROW(RunLock after(dir));
  ::close(ready[0]);
  ::close(ready[1]);
}

// The trainer often runs as root: a symbolic link named run.lock must not make it truncate the
// file the link points to; a FIFO or a device is no lock either.
TEST(RunLock, ALockThatIsNotARegularFileIsRefusedUntouched) {
  const std::string dir = fresh_dir("symlink");
  fs::create_directories(dir);
  const std::string target = fs::path(dir).parent_path().string() + "/precious";
  std::ofstream(target) << "keep me\n";
  fs::create_symlink(target, dir + "/run.lock");
  const std::string message = refusal(dir);
  EXPECT_NE(message.find("the run lock " + dir + "/run.lock is a symbolic link"), std::string::npos) << message;
  std::ifstream in(target);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");
  fs::create_symlink(dir + "/nowhere", dir + "/dangling");
  fs::remove(dir + "/run.lock");
  fs::rename(dir + "/dangling", dir + "/run.lock");
  EXPECT_NE(refusal(dir).find("is a symbolic link"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/nowhere"));  // not created through the link
  fs::remove(dir + "/run.lock");
  ASSERT_EQ(::mkfifo((dir + "/run.lock").c_str(), 0644), 0);
  EXPECT_NE(refusal(dir).find("is a FIFO (named pipe), not a regular file"), std::string::npos);
}

// Whoever wrote the holder's record, the message shows it escaped: a NUL does not cut the
// message short and an escape sequence does not reach the terminal.
TEST(RunLock, TheHoldersRecordIsShownEscaped) {
  const std::string dir = fresh_dir("record");
  fs::create_directories(dir);
  const int fd = ::open((dir + "/run.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // another open file: its lock conflicts
  const std::string record("host a\0b\x1b[31m pid 7\n", 20);
  ASSERT_EQ(::write(fd, record.data(), record.size()), static_cast<ssize_t>(record.size()));
  const std::string message = refusal(dir);
  EXPECT_NE(message.find("(host a\\x00b\\x1b[31m pid 7); wait for it"), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
  ::close(fd);
}

TEST(RunLock, DirectoryThatCannotBeCreatedIsNamedWithTheCause) {
  const std::string dir = fresh_dir("blocked");
  fs::create_directories(fs::path(dir).parent_path());
  std::ofstream(dir) << "a file where the run directory belongs";
  try {
    RunLock lock(dir + "/inner");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create run directory " + dir + "/inner"), std::string::npos)
        << e.what();
  }
}

// A trainer that held the lock may have saved a newer checkpoint between the moment this run
// looked for one and the moment it got the lock.
TEST(RunLock, ResumePointThatChangedMeanwhileIsRefused) {
  const std::string dir = fresh_dir("resume");
  EXPECT_NO_THROW(lock_run_directory(dir, "auto", std::nullopt));
  fs::create_directories(dir + "/checkpoints/step-00000003");
  std::ofstream(dir + "/checkpoints/step-00000003/manifest.json") << "{}";
  try {
    lock_run_directory(dir, "auto", std::nullopt);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("changed while this run started"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(lock_run_directory(dir, "auto", dir + "/checkpoints/step-00000003"));
}

}  // namespace
}  // namespace ustrain
