// The process mesh: the one place that turns a global rank into coordinates and groups.
//
// Five dimensions, ordered outermost to innermost: pp, dp, cp, ep, tp. tp varies fastest,
// so consecutive ranks (one node) share a tensor-parallel group; pp varies slowest.
//   rank = (((pp_i * dp + dp_i) * cp + cp_i) * ep + ep_i) * tp + tp_i
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

enum class MeshDim : int { pp = 0, dp = 1, cp = 2, ep = 3, tp = 4 };
inline constexpr int kMeshDims = 5;
const char* mesh_dim_name(MeshDim d);

struct MeshShape {
  int pp = 1, dp = 1, cp = 1, ep = 1, tp = 1;
  int size(MeshDim d) const;
  int world_size() const { return pp * dp * cp * ep * tp; }
  std::string str() const;  // "pp=1 dp=4 cp=1 ep=1 tp=2"
};

class Mesh {
 public:
  // Throws UserError when world_size does not equal the product of the dimensions.
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

 private:
  MeshShape shape_;
  int rank_;
  std::array<int, kMeshDims> coords_{};
};

}  // namespace ustrain
