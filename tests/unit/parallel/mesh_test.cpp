// The mesh's rank arithmetic: tp varies fastest, pp slowest; ep borrows its ranks from dp x cp;
// groups are consistent and partition the world.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "kernels/error.h"
#include "parallel/mesh.h"

namespace ustrain {
namespace {

using Groups = std::vector<std::vector<int>>;

// Every rank's group, by rank.
Groups groups_of(const MeshShape& s, const std::function<std::vector<int>(const Mesh&)>& group) {
  Groups all;
  for (int r = 0; r < s.world_size(); ++r) all.push_back(group(Mesh(s, r, s.world_size())));
  return all;
}

// The distinct groups, in order of their first rank.
Groups distinct(const Groups& by_rank) {
  std::set<std::vector<int>> seen;
  Groups out;
  for (const std::vector<int>& g : by_rank)
    if (seen.insert(g).second) out.push_back(g);
  return out;
}

// Each rank is in its group, every member computes the same group (same order), and the
// groups cover the world without overlapping.
void expect_partition(const MeshShape& s, const Groups& by_rank) {
  std::vector<int> owner(static_cast<std::size_t>(s.world_size()), -1);
  for (int r = 0; r < s.world_size(); ++r) {
    const std::vector<int>& g = by_rank[static_cast<std::size_t>(r)];
    EXPECT_NE(std::find(g.begin(), g.end(), r), g.end()) << "rank " << r;
    for (int member : g) {
      ASSERT_GE(member, 0);
      ASSERT_LT(member, s.world_size());
      EXPECT_EQ(by_rank[static_cast<std::size_t>(member)], g) << "ranks " << r << " and " << member;
      if (owner[static_cast<std::size_t>(member)] == -1) owner[static_cast<std::size_t>(member)] = r;
    }
  }
  for (int r = 0; r < s.world_size(); ++r) EXPECT_NE(owner[static_cast<std::size_t>(r)], -1) << "rank " << r;
}

const std::vector<std::pair<const char*, std::function<std::vector<int>(const Mesh&)>>> kGroupKinds = {
    {"tp", [](const Mesh& m) { return m.group({MeshDim::tp}); }},
    {"pp", [](const Mesh& m) { return m.group({MeshDim::pp}); }},
    {"dp", [](const Mesh& m) { return m.group({MeshDim::dp}); }},
    {"cp", [](const Mesh& m) { return m.group({MeshDim::cp}); }},
    {"dp+cp", [](const Mesh& m) { return m.group({MeshDim::dp, MeshDim::cp}); }},
    {"pp+dp+cp", [](const Mesh& m) { return m.group({MeshDim::pp, MeshDim::dp, MeshDim::cp}); }},
    {"pp+tp", [](const Mesh& m) { return m.group({MeshDim::pp, MeshDim::tp}); }},
    {"ep", [](const Mesh& m) { return m.expert_group(); }},
    {"expert gradients", [](const Mesh& m) { return m.expert_gradient_group(); }},
};

TEST(Mesh, SingleRankIsTheWholeMesh) {
  Mesh m(MeshShape{}, 0, 1);
  for (int d = 0; d < kMeshDims; ++d) EXPECT_EQ(m.coord(static_cast<MeshDim>(d)), 0);
  EXPECT_EQ(m.group({MeshDim::dp}), std::vector<int>{0});
  EXPECT_EQ(m.expert_group(), std::vector<int>{0});
  EXPECT_EQ(m.expert_gradient_group(), std::vector<int>{0});
}

TEST(Mesh, TensorParallelVariesFastest) {
  const MeshShape s{.pp = 2, .dp = 3, .tp = 2};
  // Rank 7 = ((pp 1 * 3 + dp 0) * 1 + cp 0) * 2 + tp 1.
  Mesh m(s, 7, 12);
  EXPECT_EQ(m.coord(MeshDim::tp), 1);
  EXPECT_EQ(m.coord(MeshDim::dp), 0);
  EXPECT_EQ(m.coord(MeshDim::pp), 1);
  EXPECT_EQ(m.group({MeshDim::tp}), (std::vector<int>{6, 7}));
  EXPECT_EQ(m.group({MeshDim::dp}), (std::vector<int>{7, 9, 11}));
  EXPECT_EQ(m.group({MeshDim::pp}), (std::vector<int>{1, 7}));
  EXPECT_EQ(m.index_in_group({MeshDim::dp}), 0);
}

TEST(Mesh, RankIsPpDpCpTpWithTpFastest) {
  const MeshShape s{.pp = 2, .dp = 3, .cp = 2, .tp = 2};
  for (int r = 0; r < s.world_size(); ++r) {
    const Mesh m(s, r, s.world_size());
    const int pp = m.coord(MeshDim::pp), dp = m.coord(MeshDim::dp), cp = m.coord(MeshDim::cp), tp = m.coord(MeshDim::tp);
    EXPECT_EQ(((pp * s.dp + dp) * s.cp + cp) * s.tp + tp, r);
  }
}

TEST(Mesh, CoordinatesRoundTripForEveryRank) {
  const MeshShape s{.pp = 2, .dp = 2, .cp = 3, .tp = 2};
  std::set<int> seen;
  for (int r = 0; r < s.world_size(); ++r) {
    Mesh m(s, r, s.world_size());
    std::array<int, kMeshDims> c{};
    for (int d = 0; d < kMeshDims; ++d) c[static_cast<std::size_t>(d)] = m.coord(static_cast<MeshDim>(d));
    EXPECT_EQ(m.rank_at(c), r);
    seen.insert(r);
  }
  EXPECT_EQ(static_cast<int>(seen.size()), s.world_size());
}

TEST(Mesh, CombinedGroupsPartitionTheWorld) {
  // dp x cp groups (gradient reduction) must partition the ranks, and every member of a
  // group must compute the same group in the same order.
  const MeshShape s{.dp = 2, .cp = 3, .tp = 2};
  std::set<int> covered;
  for (int r = 0; r < s.world_size(); ++r) {
    Mesh m(s, r, s.world_size());
    const std::vector<int> g = m.group({MeshDim::cp, MeshDim::dp});
    EXPECT_EQ(g.size(), 6u);
    for (int member : g) EXPECT_EQ(Mesh(s, member, s.world_size()).group({MeshDim::dp, MeshDim::cp}), g);
    EXPECT_EQ(g[static_cast<std::size_t>(m.index_in_group({MeshDim::dp, MeshDim::cp}))], r);
    covered.insert(g.begin(), g.end());
  }
  EXPECT_EQ(static_cast<int>(covered.size()), s.world_size());
}

TEST(Mesh, EveryGroupPartitionsTheWorld) {
  const MeshShape shapes[] = {
      {},
      {.pp = 2, .dp = 2, .cp = 2, .tp = 2, .ep = 2},
      {.pp = 2, .dp = 2, .cp = 2, .tp = 2, .ep = 4},
      {.dp = 4, .ep = 2},
      {.dp = 4, .ep = 4},
      {.pp = 3, .dp = 2, .cp = 3, .tp = 2, .ep = 3},
      {.pp = 2, .dp = 3, .tp = 2},
  };
  for (const MeshShape& s : shapes)
    for (const auto& [name, group] : kGroupKinds) {
      SCOPED_TRACE(s.str() + ", " + name);
      expect_partition(s, groups_of(s, group));
    }
}

TEST(Mesh, ExpertGroupsAreBlocksOfDataTimesContextAtPp2Dp2Cp2Tp2Ep2) {
  // The 16-rank mesh of parallel/README.md. At (pp, tp) = (0, 0) the dp x cp index
  // d = dp * 2 + cp runs over ranks 0, 2, 4, 6: ep blocks {0, 2}, {4, 6}.
  const MeshShape s{.pp = 2, .dp = 2, .cp = 2, .tp = 2, .ep = 2};
  ASSERT_EQ(s.world_size(), 16);
  EXPECT_EQ(distinct(groups_of(s, [](const Mesh& m) { return m.group({MeshDim::tp}); })),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(distinct(groups_of(s, [](const Mesh& m) { return m.group({MeshDim::cp}); })),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(distinct(groups_of(s, [](const Mesh& m) { return m.group({MeshDim::dp}); })),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(distinct(groups_of(s, [](const Mesh& m) { return m.group({MeshDim::pp}); })),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(distinct(groups_of(s, [](const Mesh& m) { return m.group({MeshDim::dp, MeshDim::cp}); })),
            (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(distinct(groups_of(s, [](const Mesh& m) { return m.expert_group(); })),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(distinct(groups_of(s, [](const Mesh& m) { return m.expert_gradient_group(); })),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  // ep = 4 takes the whole dp x cp group; each expert then lives on one rank of it.
  const MeshShape wide{.pp = 2, .dp = 2, .cp = 2, .tp = 2, .ep = 4};
  EXPECT_EQ(distinct(groups_of(wide, [](const Mesh& m) { return m.expert_group(); })),
            (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(Mesh(wide, 6, 16).expert_gradient_group(), std::vector<int>{6});
}

TEST(Mesh, ExpertGroupsOfDataParallelRanksAlone) {
  const MeshShape ep2{.dp = 4, .ep = 2};
  EXPECT_EQ(ep2.world_size(), 4);  // ep adds no processes
  EXPECT_EQ(distinct(groups_of(ep2, [](const Mesh& m) { return m.expert_group(); })), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(distinct(groups_of(ep2, [](const Mesh& m) { return m.expert_gradient_group(); })),
            (Groups{{0, 2}, {1, 3}}));
  const MeshShape ep4{.dp = 4, .ep = 4};
  EXPECT_EQ(distinct(groups_of(ep4, [](const Mesh& m) { return m.expert_group(); })), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(distinct(groups_of(ep4, [](const Mesh& m) { return m.expert_gradient_group(); })),
            (Groups{{0}, {1}, {2}, {3}}));
  // With tp the blocks stay at a fixed tp coordinate: d runs over ranks 1, 3, 5, 7 at tp = 1.
  const MeshShape with_tp{.dp = 4, .tp = 2, .ep = 2};
  EXPECT_EQ(Mesh(with_tp, 3, 8).expert_group(), (std::vector<int>{1, 3}));
  EXPECT_EQ(Mesh(with_tp, 3, 8).expert_gradient_group(), (std::vector<int>{3, 7}));
}

TEST(Mesh, EpOneLeavesEveryGroupAsItWas) {
  // At ep = 1 an expert group is the rank alone and the expert gradients go over dp x cp.
  for (const MeshShape& s : {MeshShape{.pp = 2, .dp = 2, .cp = 2, .tp = 2}, MeshShape{.pp = 2, .dp = 3, .tp = 2},
                             MeshShape{.dp = 4}}) {
    SCOPED_TRACE(s.str());
    for (int r = 0; r < s.world_size(); ++r) {
      const Mesh m(s, r, s.world_size());
      EXPECT_EQ(m.expert_group(), std::vector<int>{r});
      EXPECT_EQ(m.expert_gradient_group(), m.group({MeshDim::dp, MeshDim::cp}));
      // The five-dimensional order with ep = 1: (((pp * dp + dp_i) * cp + cp_i) * 1 + 0) * tp + tp_i.
      EXPECT_EQ(((((m.coord(MeshDim::pp) * s.dp + m.coord(MeshDim::dp)) * s.cp + m.coord(MeshDim::cp)) * 1 + 0) *
                     s.tp +
                 m.coord(MeshDim::tp)),
                r);
    }
  }
}

TEST(Mesh, HybridShardingBlocksOfConsecutiveDataParallelRanks) {
  // dp 4 in blocks of 2: ZeRO over {0, 1} and {2, 3}, the blocks' same places replicate.
  const MeshShape dp4{.dp = 4, .dp_shard = 2};
  EXPECT_EQ(distinct(groups_of(dp4, [](const Mesh& m) { return m.dp_shard_group(); })), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(distinct(groups_of(dp4, [](const Mesh& m) { return m.dp_replicate_group(); })), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(dp4.str(), "pp=1 dp=4 cp=1 ep=1 tp=1 dp_shard=2");
  // With pp, cp and tp: at (pp, tp) fixed, a block holds dp_shard x cp ranks (d = dp_i * cp + cp_i),
  // and a replicate group the ranks at this cp in the same place of every block.
  const MeshShape s{.pp = 2, .dp = 4, .cp = 2, .tp = 2, .dp_shard = 2};
  const Groups shard = groups_of(s, [](const Mesh& m) { return m.dp_shard_group(); });
  const Groups replicate = groups_of(s, [](const Mesh& m) { return m.dp_replicate_group(); });
  expect_partition(s, shard);
  expect_partition(s, replicate);
  EXPECT_EQ(Mesh(s, 0, 32).dp_shard_group(), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(Mesh(s, 0, 32).dp_replicate_group(), (std::vector<int>{0, 8}));
  EXPECT_EQ(Mesh(s, 27, 32).dp_shard_group(), (std::vector<int>{25, 27, 29, 31}));
  EXPECT_EQ(Mesh(s, 27, 32).dp_replicate_group(), (std::vector<int>{19, 27}));
  for (int r = 0; r < s.world_size(); ++r) {
    const Mesh m(s, r, s.world_size());
    // Together they make the gradients group: every dp x cp rank once.
    std::set<int> both;
    for (int a : m.dp_shard_group())
      for (int b : Mesh(s, a, s.world_size()).dp_replicate_group()) both.insert(b);
    const std::vector<int> gradients = m.group({MeshDim::dp, MeshDim::cp});
    EXPECT_EQ(both, std::set<int>(gradients.begin(), gradients.end())) << "rank " << r;
  }
  // Without hybrid sharding the block is the gradients group and each rank its own replica.
  const MeshShape plain{.dp = 4, .cp = 2};
  for (int r = 0; r < plain.world_size(); ++r) {
    const Mesh m(plain, r, plain.world_size());
    EXPECT_EQ(m.dp_shard_group(), m.group({MeshDim::dp, MeshDim::cp}));
    EXPECT_EQ(m.dp_replicate_group(), std::vector<int>{r});
  }
}

TEST(Mesh, DpShardThatDoesNotDivideDpIsAUserError) {
  try {
    Mesh m(MeshShape{.dp = 4, .dp_shard = 3}, 0, 4);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.dp_shard = 3 does not divide parallel.dp = 4"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Mesh(MeshShape{.dp = 4, .dp_shard = -2}, 0, 4), UserError);
}

TEST(Mesh, WrongWorldSizeIsAUserError) {
  try {
    Mesh m(MeshShape{.dp = 4}, 0, 2);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("needs 4 processes but 2 were launched"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Mesh(MeshShape{.dp = 0}, 0, 0), UserError);
  // ep multiplies nothing: dp 4 with ep 2 is four processes, not eight.
  EXPECT_THROW(Mesh(MeshShape{.dp = 4, .ep = 2}, 0, 8), UserError);
}

TEST(Mesh, EpThatDoesNotDivideDataTimesContextIsAUserError) {
  try {
    Mesh m(MeshShape{.dp = 3, .cp = 2, .ep = 4}, 0, 6);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.ep = 4 does not divide parallel.dp * parallel.cp = 3 * 2 = 6"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Mesh(MeshShape{.dp = 2, .ep = 0}, 0, 2), UserError);
}

}  // namespace
}  // namespace ustrain
