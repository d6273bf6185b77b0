// Faults of large clusters: which replica is named when checksums differ, that a flipped bit
// always changes the checksum, the failure message, how a straggler is decided, and the
// USTRAIN_INJECT_FAULT syntax.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/distributed/fault_injection.h"
#include "core/distributed/replica_check.h"
#include "core/distributed/straggler_watch.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

TEST(ReplicaCheck, OddMembersAgainstTheMajority) {
  EXPECT_TRUE(odd_members(std::vector<std::uint32_t>{7}).empty());
  EXPECT_TRUE(odd_members(std::vector<std::uint32_t>{7, 7, 7, 7}).empty());
  EXPECT_EQ(odd_members(std::vector<std::uint32_t>{7, 7, 9, 7}), (std::vector<int>{2}));
  EXPECT_EQ(odd_members(std::vector<std::uint32_t>{7, 9, 9}), (std::vector<int>{0}));
  // Two replicas that differ, or no majority: every member is named.
  EXPECT_EQ(odd_members(std::vector<std::uint32_t>{7, 9}), (std::vector<int>{0, 1}));
  EXPECT_EQ(odd_members(std::vector<std::uint32_t>{7, 7, 9, 9}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(odd_members(std::vector<std::uint32_t>{1, 2, 3}), (std::vector<int>{0, 1, 2}));
}

TEST(ReplicaCheck, EveryFlippedBitChangesTheChecksum) {
  CpuBackend be(1);
  std::vector<float> values(1031);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i) - 3.0f;
  const Tensor t(values.data(), Shape{static_cast<std::int64_t>(values.size())});
  const std::uint32_t clean = tensor_crc32(t, be);
  for (const std::size_t element : {std::size_t{0}, std::size_t{517}, values.size() - 1}) {
    for (int bit = 0; bit < 32; ++bit) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &values[element], 4);
      bits ^= 1u << bit;
      std::memcpy(&values[element], &bits, 4);
      EXPECT_NE(tensor_crc32(t, be), clean) << "element " << element << " bit " << bit;
      bits ^= 1u << bit;
      std::memcpy(&values[element], &bits, 4);
    }
  }
  EXPECT_EQ(tensor_crc32(t, be), clean);
}

TEST(ReplicaCheck, TheMessageNamesTheRanksAndTheStep) {
  const std::vector<std::int32_t> one{0, 0, 1, 0};
  const std::string m = replica_mismatch_message(40, one);
  EXPECT_NE(m.find("replica check after step 40: the parameters of rank 2 differ from its data-parallel replicas"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("--resume auto"), std::string::npos) << m;
  const std::vector<std::int32_t> pair{0, 2, 0, 2};
  const std::string p = replica_mismatch_message(8, pair);
  EXPECT_NE(p.find("ranks 1 and 3 hold replicas of the same parameters that differ"), std::string::npos) << p;
  const std::string g = replica_mismatch_message(6, one, ReplicaSubject::gradients);
  EXPECT_NE(g.find("replica check of step 6: the reduced gradients of rank 2 differ from its data-parallel replicas"),
            std::string::npos)
      << g;
}

TEST(StragglerWatch, TheSlowestRankBeyondTheMargin) {
  // Rank 2 computes 30 ms a step more than the median of a 100 ms step: named.
  const auto s = slowest_rank(std::vector<double>{50, 51, 80, 50}, 100);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 2);
  EXPECT_NEAR(s->lag_ms, 29.5, 1e-9);
  // Within 10% of the step, or under 2 ms: not a straggler.
  EXPECT_FALSE(slowest_rank(std::vector<double>{50, 51, 58, 50}, 100).has_value());
  EXPECT_FALSE(slowest_rank(std::vector<double>{1.0, 1.0, 2.5, 1.0}, 5).has_value());
  EXPECT_FALSE(slowest_rank(std::vector<double>{50}, 100).has_value());
}

TEST(InjectedFaults, ParsesTheDocumentedForms) {
  EXPECT_TRUE(InjectedFaults::parse("").empty());
  EXPECT_FALSE(InjectedFaults::parse("bitflip:rank=1:step=20").empty());
  EXPECT_FALSE(InjectedFaults::parse("slow:rank=3:ms=250,bitflip:rank=0:step=2").empty());
  EXPECT_FALSE(InjectedFaults::parse("gradflip:rank=1:step=3").empty());
  for (const char* bad : {"bitflip", "bitflip:rank=1", "gradflip:rank=1", "gradflip:step=1:rank=1", "bitflip:step=2:rank=1", "bitflip:rank=-1:step=2",
                          "slow:rank=1:ms=fast", "slow:rank=1:ms=5:extra", "melt:rank=1", "slow:rank=1:ms=5,,"}) {
    try {
      (void)InjectedFaults::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("USTRAIN_INJECT_FAULT"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ustrain
