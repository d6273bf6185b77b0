// Slices of global tensors, and how a rank file names them.
//
// A Slice is a box of a global tensor: [begin, end) along every dimension. A rank that holds
// part of a tensor (a tensor-parallel shard, a ZeRO partition) stores that box row-major as
// one safetensors entry named "STATE/NAME/SLICE", e.g.
//   param/model.layers.0.mlp.up_proj.weight/0:384,0:256
// so that a loader under another parallel layout can find and assemble any box it needs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ustrain {

struct Slice {
  std::vector<std::int64_t> begin, end;

  static Slice whole(const std::vector<std::int64_t>& shape);
  std::vector<std::int64_t> extent() const;
  std::int64_t numel() const;
  bool operator==(const Slice&) const = default;
};

std::string format_slice(const Slice& s);  // "0:384,0:256"; "" for a scalar
std::optional<Slice> parse_slice(std::string_view text);
// The common box of a and b (same rank); nullopt when they share no element.
std::optional<Slice> intersect(const Slice& a, const Slice& b);
// True when `inner` lies within `outer`.
bool contains(const Slice& outer, const Slice& inner);

// The boxes that cover elements [begin, end) of a row-major tensor of `shape` (rank 1 or 2)
// in order: a partial first row, whole rows, a partial last row. Each box is contiguous in
// the flattened tensor, so a ZeRO chunk of a flattened parameter saves as at most three.
std::vector<Slice> flat_range_boxes(const std::vector<std::int64_t>& shape, std::int64_t begin, std::int64_t end);
// The same for a tensor that is itself the box of a global tensor starting at `origin` (a
// tensor-parallel shard): the boxes in the global tensor's coordinates.
std::vector<Slice> flat_range_boxes(const std::vector<std::int64_t>& shape, std::int64_t begin, std::int64_t end,
                                    const std::vector<std::int64_t>& origin);

// Copies the elements of `region` from `src`, which holds the box `src_box` row-major, to
// `dst`, which holds the box `dst_box` row-major. `region` must lie within both boxes.
void copy_region(const float* src, const Slice& src_box, float* dst, const Slice& dst_box, const Slice& region);

// The states of a parameter that a checkpoint stores.
inline constexpr std::string_view kStateParam = "param";    // fp32 master weights
inline constexpr std::string_view kStateAdamM = "adam_m";   // AdamW first moment
inline constexpr std::string_view kStateAdamV = "adam_v";   // AdamW second moment

struct ShardKey {
  std::string state;  // param | adam_m | adam_v
  std::string name;   // the global (Hugging Face) tensor name
  Slice slice;
};

std::string format_shard_key(const ShardKey& key);
std::optional<ShardKey> parse_shard_key(std::string_view text);

}  // namespace ustrain
