// What an overdue operation concludes from the answers of the members it waits for: a silent
// member ends it at once, named; members that answer are waited for; nobody missing means the
// transport stalled.
#include "parallel/comm/peer_verdict.h"

#include <gtest/gtest.h>

#include "parallel/comm/communicator.h"

namespace ustrain {
namespace {

PeerAnswer silent(int rank) { return PeerAnswer{rank, false, false, {}}; }
PeerAnswer started(int rank) { return PeerAnswer{rank, true, true, {}}; }
PeerAnswer busy(int rank, const std::string& activity) { return PeerAnswer{rank, true, false, activity}; }

TEST(PeerVerdict, SilentMembersAreNamedAndEndTheWait) {
  const PeerVerdict v = judge({started(0), silent(1), silent(3), busy(2, "it is alive and has not communicated for 9 s")},
                              "5 s");
  EXPECT_FALSE(v.keep_waiting);
  EXPECT_EQ(v.explanation,
            "ranks 1,3 did not answer within 5 s: stopped (SIGSTOP, a debugger), hung, dead, unreachable, or too "
            "overloaded to answer in time; rank 2 has not reached this operation (it is alive and has not "
            "communicated for 9 s)");
}

TEST(PeerVerdict, MembersThatAnswerAreWaitedFor) {
  const PeerVerdict v = judge({busy(1, "A"), busy(2, "A"), busy(3, "B"), started(4)}, "5 s");
  EXPECT_TRUE(v.keep_waiting);
  EXPECT_EQ(v.explanation, "ranks 1,2 have not reached this operation (A); rank 3 has not reached this operation (B)");
}

TEST(PeerVerdict, EveryMemberInTheOperationMeansTheTransportStalled) {
  const PeerVerdict v = judge({started(1), started(2)}, "5 s");
  EXPECT_FALSE(v.keep_waiting);
  EXPECT_NE(v.explanation.find("the transport between them stalled"), std::string::npos);
}

TEST(PeerVerdict, OverdueMessageNamesOperationRankExplanationAndSetting) {
  const std::string m = overdue_message("collective all_reduce of 10 f32 (sum)", "dp group (ranks 0,1)", 0,
                                        std::chrono::milliseconds(35000), "rank 1 did not answer within 5 s: x",
                                        "parallel.comm_timeout_s");
  EXPECT_EQ(m,
            "collective all_reduce of 10 f32 (sum) on dp group (ranks 0,1) did not complete within 35 s on rank 0: "
            "rank 1 did not answer within 5 s: x. Check those ranks' output and nodes for the first error; if steps "
            "legitimately take longer, raise parallel.comm_timeout_s");
}

}  // namespace
}  // namespace ustrain
