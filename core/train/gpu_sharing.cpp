#include "core/train/gpu_sharing.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace ustrain {
namespace {

// FNV-1a: the same on every rank whatever its standard library.
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "";
  return name.data();
}

}  // namespace

bool ranks_share_a_gpu(ProcessGroup& world, const std::string& gpu_uuid) {
  if (world.size() == 1) return false;
  const std::uint64_t key = fnv1a(host_name() + "/" + gpu_uuid);
  std::array<std::int32_t, 2> mine{static_cast<std::int32_t>(key >> 32), static_cast<std::int32_t>(key)};
  std::vector<std::int32_t> all(2 * static_cast<std::size_t>(world.size()));
  world.host()
      .all_gather(Tensor(all.data(), Shape{static_cast<std::int64_t>(all.size())}, DType::i32),
                  Tensor(mine.data(), Shape{2}, DType::i32))
      .wait();
  std::vector<std::uint64_t> keys;
  for (std::size_t i = 0; i < all.size(); i += 2)
    keys.push_back(static_cast<std::uint64_t>(static_cast<std::uint32_t>(all[i])) << 32 |
                   static_cast<std::uint32_t>(all[i + 1]));
  std::sort(keys.begin(), keys.end());
  return std::adjacent_find(keys.begin(), keys.end()) != keys.end();
}

}  // namespace ustrain
