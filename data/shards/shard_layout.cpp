#include "data/shards/shard_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/shards/hdf5_util.h"

namespace ustrain {
namespace {

using hdf5::Handle;

constexpr const char* kRedo = "convert it again with `ustrain data convert --format shards`";

std::vector<TokenExtent> chunk_extents(const std::string& path, hid_t dataset, std::int64_t chunk_tokens,
                                       std::int64_t tokens, int token_bytes) {
  std::vector<TokenExtent> extents;
  for (std::int64_t first = 0; first < tokens; first += chunk_tokens) {
    hsize_t coordinate = static_cast<hsize_t>(first), size = 0;
    unsigned skipped = 0;  // bit i set: filter i was not applied to this chunk
    haddr_t address = HADDR_UNDEF;
    if (H5Dget_chunk_info_by_coord(dataset, &coordinate, &skipped, &address, &size) < 0 || address == HADDR_UNDEF)
      hdf5::fail_damaged(path, fmt::format("the chunk of /tokens at token {} is missing", first));
    if (size != static_cast<hsize_t>(chunk_tokens * token_bytes))
      hdf5::fail_damaged(path, fmt::format("the chunk of /tokens at token {} has {} bytes, expected {}", first, size,
                                           chunk_tokens * token_bytes));
    extents.push_back({first, std::min(chunk_tokens, tokens - first), address});
  }
  return extents;
}

}  // namespace

ShardLayout read_shard_layout(const std::string& path) {
  Handle file = hdf5::open_for_reading(path);
  Handle dataset = hdf5::open_dataset(path, file.get(), "tokens");
  ShardLayout layout;
  layout.tokens = static_cast<std::int64_t>(hdf5::integer_vector_length(path, dataset.get(), "tokens"));
  Handle type(H5Dget_type(dataset.get()), H5Tclose);
  const std::size_t width = H5Tget_size(type.get());
  if ((width != 2 && width != 4) || H5Tget_order(type.get()) != H5T_ORDER_LE ||
      H5Tget_sign(type.get()) != H5T_SGN_NONE)
    hdf5::fail(path, fmt::format("/tokens is not little-endian uint16 or uint32 ({}-byte integers); {}", width, kRedo));
  layout.token_bytes = static_cast<int>(width);

  Handle create(H5Dget_create_plist(dataset.get()), H5Pclose);
  const H5D_layout_t kind = H5Pget_layout(create.get());
  if (layout.tokens == 0) return layout;
  if (kind == H5D_CONTIGUOUS) {
    const haddr_t offset = H5Dget_offset(dataset.get());
    if (offset == HADDR_UNDEF) hdf5::fail_damaged(path, "/tokens has no stored data");
    layout.extents.push_back({0, layout.tokens, offset});
    layout.extent_tokens = layout.tokens;
  } else if (kind == H5D_CHUNKED) {
    hsize_t chunk = 0;
    if (H5Pget_chunk(create.get(), 1, &chunk) != 1 || chunk == 0)
      hdf5::fail_damaged(path, "/tokens has an invalid chunk shape");
    layout.filtered = H5Pget_nfilters(create.get()) > 0;
    if (layout.filtered) return layout;
    layout.extent_tokens = static_cast<std::int64_t>(chunk);
    layout.extents = chunk_extents(path, dataset.get(), layout.extent_tokens, layout.tokens, layout.token_bytes);
  } else {
    hdf5::fail(path, fmt::format("/tokens uses a compact or virtual layout, which ustrain's loader does not "
                                 "read; {}",
                                 kRedo));
  }
  return layout;
}

std::vector<unsigned char> read_shard_token_bytes(const std::string& path, const ShardLayout& layout) {
  Handle file = hdf5::open_for_reading(path);
  Handle dataset = hdf5::open_dataset(path, file.get(), "tokens");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(layout.tokens) * static_cast<std::size_t>(layout.token_bytes));
  const hid_t memory_type = layout.token_bytes == 2 ? H5T_STD_U16LE : H5T_STD_U32LE;
  if (!bytes.empty() && H5Dread(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0)
    hdf5::fail_damaged(path, "cannot read or decompress /tokens");
  return bytes;
}

}  // namespace ustrain
