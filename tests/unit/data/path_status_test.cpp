// A path that does not exist and one that cannot be reached are told apart.
#include "data/files/path_status.h"

#include <gtest/gtest.h>

#include <string>

namespace ustrain {
namespace {

TEST(PathStatus, ExistingMissingAndUnreachable) {
  EXPECT_EQ(path_status(::testing::TempDir()).access, PathAccess::exists);
  EXPECT_EQ(describe_unusable(path_status(::testing::TempDir())), "");
  const PathStatus missing = path_status(::testing::TempDir() + "no_such_file_for_ustrain");
  EXPECT_EQ(missing.access, PathAccess::missing);
  EXPECT_EQ(describe_unusable(missing), "does not exist");
  // A component longer than any filesystem takes: the path is not missing, it cannot be looked at.
  const PathStatus long_name = path_status(::testing::TempDir() + std::string(300, 'n') + "/x");
  EXPECT_EQ(long_name.access, PathAccess::unreachable);
  EXPECT_EQ(describe_unusable(long_name), "cannot be accessed (File name too long)");
}

}  // namespace
}  // namespace ustrain
