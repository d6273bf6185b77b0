#include "core/checkpoint/slices.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "kernels/error.h"

namespace ustrain {
namespace {

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (error != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

// Offset of the element at global coordinates `at` inside `box`, row-major.
std::int64_t offset_in(const Slice& box, const std::vector<std::int64_t>& at) {
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < at.size(); ++d) offset = offset * (box.end[d] - box.begin[d]) + (at[d] - box.begin[d]);
  return offset;
}

}  // namespace

Slice Slice::whole(const std::vector<std::int64_t>& shape) {
  return Slice{std::vector<std::int64_t>(shape.size(), 0), shape};
}

std::vector<std::int64_t> Slice::extent() const {
  std::vector<std::int64_t> e(begin.size());
  for (std::size_t d = 0; d < begin.size(); ++d) e[d] = end[d] - begin[d];
  return e;
}

std::int64_t Slice::numel() const {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < begin.size(); ++d) n *= end[d] - begin[d];
  return n;
}

std::string format_slice(const Slice& s) {
  std::string out;
  for (std::size_t d = 0; d < s.begin.size(); ++d) out += fmt::format("{}{}:{}", d ? "," : "", s.begin[d], s.end[d]);
  return out;
}

std::optional<Slice> parse_slice(std::string_view text) {
  Slice s;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view dim = text.substr(0, comma);
    const std::size_t colon = dim.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const auto b = parse_int(dim.substr(0, colon));
    const auto e = parse_int(dim.substr(colon + 1));
    if (!b || !e || *e < *b) return std::nullopt;
    s.begin.push_back(*b);
    s.end.push_back(*e);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt;  // a trailing comma
  }
  return s;
}

std::optional<Slice> intersect(const Slice& a, const Slice& b) {
  USTRAIN_ASSERT(a.begin.size() == b.begin.size(), "slices of different rank");
  Slice r;
  for (std::size_t d = 0; d < a.begin.size(); ++d) {
    r.begin.push_back(std::max(a.begin[d], b.begin[d]));
    r.end.push_back(std::min(a.end[d], b.end[d]));
    if (r.end[d] <= r.begin[d]) return std::nullopt;
  }
  return r;
}

bool contains(const Slice& outer, const Slice& inner) {
  if (outer.begin.size() != inner.begin.size()) return false;
  for (std::size_t d = 0; d < outer.begin.size(); ++d)
    if (inner.begin[d] < outer.begin[d] || inner.end[d] > outer.end[d]) return false;
  return true;
}

void copy_region(const float* src, const Slice& src_box, float* dst, const Slice& dst_box, const Slice& region) {
  USTRAIN_ASSERT(contains(src_box, region) && contains(dst_box, region), "region outside its boxes");
  const std::size_t rank = region.begin.size();
  if (region.numel() == 0) return;
  if (rank == 0) {
    *dst = *src;
    return;
  }
  // Rows along the last dimension are contiguous in both boxes: copy them whole.
  const auto run = static_cast<std::size_t>(region.end[rank - 1] - region.begin[rank - 1]);
  std::vector<std::int64_t> at = region.begin;
  for (;;) {
    std::memcpy(dst + offset_in(dst_box, at), src + offset_in(src_box, at), run * sizeof(float));
    std::size_t d = rank - 1;  // advance the outer dimensions like an odometer
    while (d > 0) {
      --d;
      if (++at[d] < region.end[d]) break;
      at[d] = region.begin[d];
      if (d == 0) return;
    }
    if (rank == 1) return;
  }
}

std::string format_shard_key(const ShardKey& key) {
  return fmt::format("{}/{}/{}", key.state, key.name, format_slice(key.slice));
}

std::optional<ShardKey> parse_shard_key(std::string_view text) {
  const std::size_t first = text.find('/');
  const std::size_t last = text.rfind('/');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  ShardKey key;
  key.state = std::string(text.substr(0, first));
  key.name = std::string(text.substr(first + 1, last - first - 1));
  const auto slice = parse_slice(text.substr(last + 1));
  if (key.state.empty() || key.name.empty() || !slice) return std::nullopt;
  key.slice = *slice;
  return key;
}

std::vector<Slice> flat_range_boxes(const std::vector<std::int64_t>& shape, std::int64_t begin, std::int64_t end) {
  USTRAIN_ASSERT(shape.size() == 1 || shape.size() == 2, "flat ranges of tensors of rank 1 or 2 only");
  USTRAIN_ASSERT(0 <= begin && begin <= end, "bad flat range");
  if (shape.size() == 1) {
    USTRAIN_ASSERT(end <= shape[0], "flat range past the tensor");
    if (begin == end) return {};
    return {Slice{{begin}, {end}}};
  }
  const std::int64_t cols = shape[1];
  USTRAIN_ASSERT(cols > 0 && end <= shape[0] * cols, "flat range past the tensor");
  std::vector<Slice> boxes;
  std::int64_t row = begin / cols, col = begin % cols;
  const std::int64_t last_row = end / cols, last_col = end % cols;
  if (row == last_row) {
    if (col < last_col) boxes.push_back(Slice{{row, col}, {row + 1, last_col}});
    return boxes;
  }
  if (col > 0) {
    boxes.push_back(Slice{{row, col}, {row + 1, cols}});
    ++row;
  }
  if (row < last_row) boxes.push_back(Slice{{row, 0}, {last_row, cols}});
  if (last_col > 0) boxes.push_back(Slice{{last_row, 0}, {last_row + 1, last_col}});
  return boxes;
}

std::vector<Slice> flat_range_boxes(const std::vector<std::int64_t>& shape, std::int64_t begin, std::int64_t end,
                                    const std::vector<std::int64_t>& origin) {
  USTRAIN_ASSERT(origin.size() == shape.size(), "the origin has another rank than the tensor");
  std::vector<Slice> boxes = flat_range_boxes(shape, begin, end);
  for (Slice& box : boxes)
    for (std::size_t d = 0; d < origin.size(); ++d) {
      box.begin[d] += origin[d];
      box.end[d] += origin[d];
    }
  return boxes;
}

}  // namespace ustrain
