#include "core/distributed/rank_lines.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "core/distributed/rank_agreement.h"
#include "core/model/rng.h"

namespace ustrain {
namespace {

std::vector<std::string_view> lines_of(const std::string& text) {
  std::vector<std::string_view> lines;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    lines.push_back(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  return lines;
}

}  // namespace

std::string lines_to_print(Communicator& world, const std::string& text) {
  const std::vector<std::string_view> lines = lines_of(text);
  // Lines travel as 64-bit hashes, two words each, padded to the longest rank's count.
  const std::vector<std::uint32_t> counts = gather_words(world, {static_cast<std::uint32_t>(lines.size())});
  const std::size_t longest = *std::max_element(counts.begin(), counts.end());
  std::vector<std::uint32_t> hashes(2 * longest, 0);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::uint64_t h = hash_string(lines[i]);
    hashes[2 * i] = static_cast<std::uint32_t>(h);
    hashes[2 * i + 1] = static_cast<std::uint32_t>(h >> 32);
  }
  const std::vector<std::uint32_t> all = gather_words(world, hashes);
  if (world.rank() == 0) return text;
  std::set<std::uint64_t> leader;  // rank 0's lines, the first of `all`
  for (std::size_t i = 0; i < counts[0]; ++i)
    leader.insert(static_cast<std::uint64_t>(all[2 * i]) | static_cast<std::uint64_t>(all[2 * i + 1]) << 32);
  std::string own;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (!leader.contains(static_cast<std::uint64_t>(hashes[2 * i]) | static_cast<std::uint64_t>(hashes[2 * i + 1]) << 32))
      own += fmt::format("rank {}: {}\n", world.rank(), lines[i]);
  return own;
}

}  // namespace ustrain
