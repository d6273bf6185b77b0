// The process mesh: the one place that turns a global rank into coordinates and groups.
//
// Four dimensions make the world, ordered outermost to innermost: pp, dp, cp, tp. tp varies
// fastest, so consecutive ranks (one node) share a tensor-parallel group; pp varies slowest.
//   rank = ((pp_i * dp + dp_i) * cp + cp_i) * tp + tp_i
//
// Expert parallelism is no factor of the world: it borrows its ranks from dp x cp ("parallel
// folding"), since those ranks read different tokens and so have tokens to exchange. At fixed
// (pp, tp), number the dp x cp ranks by d = dp_i * cp + cp_i; the ep group of a rank is the
// block of `ep` consecutive d holding its own, and its expert-gradient group (the ranks that
// hold the same experts) takes the same position in every block: dp * cp / ep ranks.
//
// Hybrid sharding (HSDP) splits dp into blocks of `dp_shard` consecutive dp ranks: ZeRO shards
// over the ranks of a block (times cp, whose ranks add gradients too) and the blocks replicate
// each other. The replicate group of a rank holds the ranks at the same place in every block.
// Consecutive dp ranks are the nearest (one node when tp * cp * dp_shard fits in it), so the
// parameter gathers stay close and only the gradient shards cross the blocks.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

enum class MeshDim : int { pp = 0, dp = 1, cp = 2, tp = 3 };
inline constexpr int kMeshDims = 4;
const char* mesh_dim_name(MeshDim d);

struct MeshShape {
  int pp = 1, dp = 1, cp = 1, tp = 1;
  int ep = 1;  // divides dp * cp; not a factor of world_size()
  int dp_shard = 0;  // dp ranks a ZeRO shard group spans; divides dp; 0 means all of dp
  int shard_dp() const { return dp_shard == 0 ? dp : dp_shard; }
  bool hybrid() const { return shard_dp() < dp; }
  int size(MeshDim d) const;
  int world_size() const { return pp * dp * cp * tp; }
  std::string str() const;  // "pp=1 dp=4 cp=1 ep=1 tp=2", and " dp_shard=2" when hybrid
};

class Mesh {
 public:
  // Throws UserError when world_size does not equal pp * dp * cp * tp, or ep does not divide
  // dp * cp.
  Mesh(MeshShape shape, int rank, int world_size);

  const MeshShape& shape() const { return shape_; }
  int rank() const { return rank_; }
  int world_size() const { return shape_.world_size(); }

  // This rank's coordinate along d.
  int coord(MeshDim d) const { return coords_[static_cast<std::size_t>(d)]; }
  // The global rank at the given coordinates.
  int rank_at(const std::array<int, kMeshDims>& coords) const;
  // Global ranks of this rank's group spanning the given dimensions (others fixed),
  // ordered by their coordinates, e.g. group({MeshDim::dp, MeshDim::cp}).
  std::vector<int> group(std::initializer_list<MeshDim> dims) const;
  // This rank's index inside group(dims).
  int index_in_group(std::initializer_list<MeshDim> dims) const;
  // The ranks whose coordinate along `dim` is one of `coords` (in that order), the others
  // this rank's: e.g. the first and last pipeline stages, group_at(MeshDim::pp, {0, pp - 1}).
  std::vector<int> group_at(MeshDim dim, const std::vector<int>& coords) const;

  // Expert parallelism (folded into dp x cp, see above), both ordered by d:
  // the ep ranks at this (pp, tp) whose d lies in this rank's block [b * ep, (b + 1) * ep);
  std::vector<int> expert_group() const;
  // the dp * cp / ep ranks at this (pp, tp) whose d has this rank's position d % ep in its block.
  std::vector<int> expert_gradient_group() const;

  // Hybrid sharding (see above), both ordered by d = dp_i * cp + cp_i at this rank's (pp, tp):
  // the dp_shard * cp ranks of this rank's block of dp, over which ZeRO shards;
  std::vector<int> dp_shard_group() const;
  // the dp / dp_shard ranks at this rank's cp whose dp_i has this rank's place in its block.
  std::vector<int> dp_replicate_group() const;

 private:
  // The rank at this rank's (pp, tp) whose dp x cp index is d.
  int rank_at_data_index(int d) const;

  MeshShape shape_;
  int rank_;
  std::array<int, kMeshDims> coords_{};
};

}  // namespace ustrain
