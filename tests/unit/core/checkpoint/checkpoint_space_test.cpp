// Before training: a checkpoint directory that cannot be written, or a disk without room for
// one checkpoint, is refused at once instead of after the whole run.
#include "core/checkpoint/space.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/error.h"

namespace ustrain {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

std::string fresh_dir(const std::string& tag) {
  const std::string dir = ::testing::TempDir() + "ustrain_ckpt_space_" + std::to_string(::getpid()) + "_" + tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(CheckpointDirectoryCheck, CreatesTheDirectoryAndLeavesNoProbeBehind) {
  const std::string run = fresh_dir("create");
  check_checkpoint_directory(run + "/checkpoints");
  EXPECT_TRUE(fs::is_directory(run + "/checkpoints"));
  EXPECT_TRUE(fs::is_empty(run + "/checkpoints"));
  fs::remove_all(run);
}

TEST(CheckpointDirectoryCheck, AFileWhereTheDirectoryBelongsIsRefused) {
  const std::string run = fresh_dir("file");
  std::ofstream(run + "/checkpoints") << "not a directory";
  try {
    check_checkpoint_directory(run + "/checkpoints");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(run + "/checkpoints is not a directory"), std::string::npos) << e.what();
  }
  fs::remove_all(run);
}

// A link to a directory that is gone (a scratch filesystem not mounted): named as such, not
// "File exists".
TEST(CheckpointDirectoryCheck, ADanglingLinkIsNamedWithItsTarget) {
  const std::string run = fresh_dir("dangling");
  fs::create_directory_symlink(run + "/scratch/ckpt", run + "/checkpoints");
  try {
    check_checkpoint_directory(run + "/checkpoints");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(run + "/checkpoints is a symbolic link to " + run +
                                         "/scratch/ckpt, which does not exist"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(run);
}

TEST(CheckpointSpace, RefusesLessThanOneCheckpointAndWarnsBelowTwo) {
  const SpaceCheck none = check_space("R", 100 * kMiB, 60 * kMiB);
  EXPECT_NE(none.error.find("the filesystem of R has 60.00 MiB free, less than the 100.00 MiB one checkpoint"),
            std::string::npos)
      << none.error;
  const SpaceCheck one = check_space("R", 100 * kMiB, 150 * kMiB);
  EXPECT_TRUE(one.error.empty());
  EXPECT_NE(one.warning.find("fewer than two checkpoints"), std::string::npos) << one.warning;
  const SpaceCheck plenty = check_space("R", 100 * kMiB, 200 * kMiB);
  EXPECT_TRUE(plenty.error.empty() && plenty.warning.empty());
}

TEST(CheckpointSpace, FreeBytesOfARealFilesystem) {
  const std::optional<std::uint64_t> free = free_bytes(::testing::TempDir());
  ASSERT_TRUE(free);
  EXPECT_GT(*free, 0u);
  EXPECT_FALSE(free_bytes("/no/such/directory/anywhere"));
}

}  // namespace
}  // namespace ustrain
