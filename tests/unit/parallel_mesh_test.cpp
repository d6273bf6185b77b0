// The mesh's rank arithmetic: tp varies fastest, pp slowest; groups are consistent.
#include <gtest/gtest.h>

#include <set>

#include "kernels/error.h"
#include "parallel/mesh.h"

namespace ustrain {
namespace {

TEST(Mesh, SingleRankIsTheWholeMesh) {
  Mesh m(MeshShape{}, 0, 1);
  for (int d = 0; d < kMeshDims; ++d) EXPECT_EQ(m.coord(static_cast<MeshDim>(d)), 0);
  EXPECT_EQ(m.group({MeshDim::dp}), std::vector<int>{0});
}

TEST(Mesh, TensorParallelVariesFastest) {
  const MeshShape s{/*pp=*/2, /*dp=*/3, /*cp=*/1, /*ep=*/1, /*tp=*/2};
  // Rank 7 = ((pp 1 * 3 + dp 0) * 1 + 0) * 1 * 2 + tp 1.
  Mesh m(s, 7, 12);
  EXPECT_EQ(m.coord(MeshDim::tp), 1);
  EXPECT_EQ(m.coord(MeshDim::dp), 0);
  EXPECT_EQ(m.coord(MeshDim::pp), 1);
  EXPECT_EQ(m.group({MeshDim::tp}), (std::vector<int>{6, 7}));
  EXPECT_EQ(m.group({MeshDim::dp}), (std::vector<int>{7, 9, 11}));
  EXPECT_EQ(m.group({MeshDim::pp}), (std::vector<int>{1, 7}));
  EXPECT_EQ(m.index_in_group({MeshDim::dp}), 0);
}

TEST(Mesh, CoordinatesRoundTripForEveryRank) {
  const MeshShape s{2, 2, 3, 1, 2};
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
  const MeshShape s{1, 2, 3, 1, 2};
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

TEST(Mesh, WrongWorldSizeIsAUserError) {
  try {
    Mesh m(MeshShape{1, 4, 1, 1, 1}, 0, 2);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("needs 4 processes but 2 were launched"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Mesh(MeshShape{1, 0, 1, 1, 1}, 0, 0), UserError);
}

}  // namespace
}  // namespace ustrain
