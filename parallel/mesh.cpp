#include "parallel/mesh.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/error.h"

namespace ustrain {

const char* mesh_dim_name(MeshDim d) {
  static constexpr const char* kNames[kMeshDims] = {"pp", "dp", "cp", "tp"};
  return kNames[static_cast<int>(d)];
}

int MeshShape::size(MeshDim d) const {
  switch (d) {
    case MeshDim::pp: return pp;
    case MeshDim::dp: return dp;
    case MeshDim::cp: return cp;
    case MeshDim::tp: return tp;
  }
  return 1;
}

std::string MeshShape::str() const {
  const std::string shard = hybrid() ? fmt::format(" dp_shard={}", dp_shard) : "";
  return fmt::format("pp={} dp={} cp={} ep={} tp={}{}", pp, dp, cp, ep, tp, shard);
}

Mesh::Mesh(MeshShape shape, int rank, int world_size) : shape_(shape), rank_(rank) {
  for (int d = 0; d < kMeshDims; ++d)
    if (shape_.size(static_cast<MeshDim>(d)) < 1)
      throw UserError(fmt::format("parallel.{} must be at least 1", mesh_dim_name(static_cast<MeshDim>(d))));
  if (shape_.ep < 1) throw UserError("parallel.ep must be at least 1");
  if ((shape_.dp * shape_.cp) % shape_.ep != 0)
    throw UserError(fmt::format("parallel.ep = {} does not divide parallel.dp * parallel.cp = {} * {} = {}; expert "
                                "parallelism borrows its ranks from the data- and context-parallel ones, so choose "
                                "an ep that divides dp * cp",
                                shape_.ep, shape_.dp, shape_.cp, shape_.dp * shape_.cp));
  if (shape_.dp_shard < 0 || shape_.dp % shape_.shard_dp() != 0)
    throw UserError(fmt::format("parallel.dp_shard = {} does not divide parallel.dp = {}; ZeRO shards over blocks of "
                                "dp_shard consecutive data-parallel ranks, so choose a divisor of dp (0 for all of dp)",
                                shape_.dp_shard, shape_.dp));
  if (world_size != shape_.world_size())
    throw UserError(fmt::format(
        "the layout {} needs {} processes but {} were launched; launch {} ranks or change the parallel section",
        shape_.str(), shape_.world_size(), world_size, shape_.world_size()));
  USTRAIN_ASSERT(rank >= 0 && rank < world_size, "rank out of range");
  int rest = rank;
  for (int d = kMeshDims - 1; d >= 0; --d) {  // tp (innermost) first
    const int n = shape_.size(static_cast<MeshDim>(d));
    coords_[static_cast<std::size_t>(d)] = rest % n;
    rest /= n;
  }
}

int Mesh::rank_at(const std::array<int, kMeshDims>& coords) const {
  int r = 0;
  for (int d = 0; d < kMeshDims; ++d) {
    const int n = shape_.size(static_cast<MeshDim>(d));
    USTRAIN_ASSERT(coords[static_cast<std::size_t>(d)] >= 0 && coords[static_cast<std::size_t>(d)] < n,
                   "mesh coordinate out of range");
    r = r * n + coords[static_cast<std::size_t>(d)];
  }
  return r;
}

std::vector<int> Mesh::group(std::initializer_list<MeshDim> dims) const {
  // Enumerate the chosen dimensions in mesh order (outermost first) so the group's
  // order is the same on every member whatever order `dims` lists them in.
  std::vector<int> chosen;
  for (int d = 0; d < kMeshDims; ++d)
    if (std::find(dims.begin(), dims.end(), static_cast<MeshDim>(d)) != dims.end()) chosen.push_back(d);
  int count = 1;
  for (int d : chosen) count *= shape_.size(static_cast<MeshDim>(d));
  std::vector<int> ranks;
  ranks.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    std::array<int, kMeshDims> c = coords_;
    int rest = i;
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) {
      const int n = shape_.size(static_cast<MeshDim>(*it));
      c[static_cast<std::size_t>(*it)] = rest % n;
      rest /= n;
    }
    ranks.push_back(rank_at(c));
  }
  return ranks;
}

std::vector<int> Mesh::group_at(MeshDim dim, const std::vector<int>& coords) const {
  std::vector<int> ranks;
  for (int c : coords) {
    std::array<int, kMeshDims> at = coords_;
    at[static_cast<std::size_t>(dim)] = c;
    ranks.push_back(rank_at(at));
  }
  return ranks;
}

int Mesh::rank_at_data_index(int d) const {
  std::array<int, kMeshDims> at = coords_;
  at[static_cast<std::size_t>(MeshDim::dp)] = d / shape_.cp;
  at[static_cast<std::size_t>(MeshDim::cp)] = d % shape_.cp;
  return rank_at(at);
}

std::vector<int> Mesh::expert_group() const {
  const int ep = shape_.ep;
  const int first = (coord(MeshDim::dp) * shape_.cp + coord(MeshDim::cp)) / ep * ep;
  std::vector<int> ranks;
  for (int d = first; d < first + ep; ++d) ranks.push_back(rank_at_data_index(d));
  return ranks;
}

std::vector<int> Mesh::expert_gradient_group() const {
  const int ep = shape_.ep;
  const int position = (coord(MeshDim::dp) * shape_.cp + coord(MeshDim::cp)) % ep;
  std::vector<int> ranks;
  for (int d = position; d < shape_.dp * shape_.cp; d += ep) ranks.push_back(rank_at_data_index(d));
  return ranks;
}

std::vector<int> Mesh::dp_shard_group() const {
  const int block = shape_.shard_dp() * shape_.cp;
  const int first = coord(MeshDim::dp) / shape_.shard_dp() * block;
  std::vector<int> ranks;
  for (int d = first; d < first + block; ++d) ranks.push_back(rank_at_data_index(d));
  return ranks;
}

std::vector<int> Mesh::dp_replicate_group() const {
  const int n = shape_.shard_dp();
  std::vector<int> ranks;
  for (int dp_i = coord(MeshDim::dp) % n; dp_i < shape_.dp; dp_i += n)
    ranks.push_back(rank_at_data_index(dp_i * shape_.cp + coord(MeshDim::cp)));
  return ranks;
}

int Mesh::index_in_group(std::initializer_list<MeshDim> dims) const {
  const std::vector<int> g = group(dims);
  return static_cast<int>(std::find(g.begin(), g.end(), rank_) - g.begin());
}

}  // namespace ustrain
