#include "core/distributed/fail_together.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/error.h"

namespace ustrain {

void fail_together(Communicator& group, const std::function<void()>& work) {
  std::optional<std::string> error;
  try {
    work();
  } catch (const UserError& e) {
    error = e.what();
  }
  if (group.size() == 1) {
    if (error) throw UserError(*error);
    return;
  }
  // Which ranks failed, with the length of their message.
  std::vector<std::uint32_t> lengths(static_cast<std::size_t>(group.size()));
  std::uint32_t mine = error ? static_cast<std::uint32_t>(error->size()) + 1 : 0;
  group.all_gather(Tensor(lengths.data(), Shape{group.size()}, DType::u32), Tensor(&mine, Shape{1}, DType::u32))
      .wait();
  int first = -1;
  for (int r = 0; r < group.size() && first < 0; ++r)
    if (lengths[static_cast<std::size_t>(r)] > 0) first = r;
  if (first < 0) return;
  // Its message, in 32-bit words from the failing rank.
  const std::size_t bytes = lengths[static_cast<std::size_t>(first)];
  std::vector<std::uint32_t> words((bytes + 3) / 4, 0);
  if (group.rank() == first) std::memcpy(words.data(), error->c_str(), bytes);
  group.broadcast(Tensor(words.data(), Shape{static_cast<std::int64_t>(words.size())}, DType::u32), first).wait();
  const std::string message(reinterpret_cast<const char*>(words.data()));
  throw UserError(fmt::format("rank {}: {}", group.ranks()[static_cast<std::size_t>(first)], message));
}

}  // namespace ustrain
