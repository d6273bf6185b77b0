// main() of the multi-rank test binaries: one World for the whole run, created before the
// tests and finalised after them. Ranks other than 0 print failures only.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/mpi/mpi_test_world.h"

namespace ustrain::mpi_test {
namespace {
World* the_world = nullptr;  // the test harness's one World, owned by main
}  // namespace

World& world() { return *the_world; }

}  // namespace ustrain::mpi_test

int main(int argc, char** argv) {
  const ustrain::ProcessInfo process = ustrain::discover_process();
  if (process.rank != 0) GTEST_FLAG_SET(brief, true);  // read by InitGoogleTest
  ::testing::InitGoogleTest(&argc, argv);
  // Short deadline and patience: a test that leaves a peer behind fails in seconds, not minutes.
  ustrain::World world(process, ustrain::CommOptions{std::chrono::seconds(10), std::chrono::seconds(10)});
  ustrain::mpi_test::the_world = &world;
  const int status = RUN_ALL_TESTS();
  ustrain::mpi_test::the_world = nullptr;
  return status;
}
