// Ranks whose start facts differ stop with one message naming what differs: a value of one
// fact, or, when the lists of facts differ, the command or the build.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/distributed/rank_agreement.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain {
namespace {

using mpi_test::world;

std::string error_of(const std::vector<RankFact>& facts) {
  auto everyone = world().everyone();
  try {
    check_ranks_agree(*everyone, facts);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(RankAgreement, EqualFactsPass) {
  EXPECT_EQ(error_of({{"ustrain version", "1"}, {"the command", "ustrain train"}, {"run.seed", "7"}}), "");
}

TEST(RankAgreement, ADifferentValueIsNamedWithItsRanks) {
  const std::string seed = world().rank() == 0 ? "7" : "8";
  const std::string e = error_of({{"ustrain version", "1"}, {"the command", "ustrain train"}, {"run.seed", seed}});
  EXPECT_NE(e.find("disagree on run.seed (rank 0: 7; rank"), std::string::npos) << e;
}

TEST(RankAgreement, OtherFactListsOfOneBuildAreOtherCommands) {
  std::vector<RankFact> facts{{"ustrain version", "1"}, {"the command", "ustrain train"}};
  if (world().rank() == 1) facts = {{"ustrain version", "1"}, {"the command", "ustrain eval"}, {"eval.batches", "4"}};
  const std::string e = error_of(facts);
  EXPECT_NE(e.find("run different commands (rank"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1: ustrain eval"), std::string::npos) << e;
}

TEST(RankAgreement, OtherFactListsOfOtherBuildsAreOtherBuilds) {
  std::vector<RankFact> facts{{"ustrain version", "1"}, {"the command", "ustrain train"}};
  if (world().rank() == 1) facts = {{"ustrain version", "2"}, {"the command", "ustrain train"}, {"new.key", "x"}};
  const std::string e = error_of(facts);
  EXPECT_NE(e.find("run different ustrain builds (rank"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1: 2"), std::string::npos) << e;
}

}  // namespace
}  // namespace ustrain
