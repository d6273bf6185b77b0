// Work that fails on some ranks only stops every rank with the same message, instead of
// leaving the others waiting in their next collective.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/distributed/fail_together.h"
#include "kernels/error.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

std::string error_of(Communicator& world, const std::function<void()>& work) {
  try {
    fail_together(world, work);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(FailTogether, NothingFailsNothingIsThrown) {
  auto world = mpi_test::world().everyone();
  EXPECT_EQ(error_of(*world, [] {}), "");
}

TEST(FailTogether, EveryRankGetsTheLowestFailingRanksMessage) {
  auto world = mpi_test::world().everyone();
  const int last = world->size() - 1;
  const std::string m = error_of(*world, [&] {
    if (world->rank() == last) throw UserError("the disk of rank " + std::to_string(last) + " is full");
  });
  EXPECT_EQ(m, "rank " + std::to_string(last) + ": the disk of rank " + std::to_string(last) + " is full");
  // Two failing ranks: the lower one speaks for both.
  const std::string both = error_of(*world, [&] {
    if (world->rank() >= last - 1) throw UserError(std::string(300, 'x') + std::to_string(world->rank()));
  });
  EXPECT_EQ(both, "rank " + std::to_string(last - 1) + ": " + std::string(300, 'x') + std::to_string(last - 1));
  // The group still works afterwards.
  EXPECT_EQ(error_of(*world, [] {}), "");
}

}  // namespace
}  // namespace ustrain
