#include "core/distributed/fail_together.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/error.h"

namespace ustrain {

std::string broadcast_text(Communicator& group, const std::string& text, int root) {
  if (group.size() == 1) return text;
  std::uint32_t bytes = group.rank() == root ? static_cast<std::uint32_t>(text.size()) : 0;
  group.broadcast(Tensor(&bytes, Shape{1}, DType::u32), root).wait();
  std::vector<std::uint32_t> words((bytes + 3) / 4 + 1, 0);
  if (group.rank() == root) std::memcpy(words.data(), text.data(), bytes);
  group.broadcast(Tensor(words.data(), Shape{static_cast<std::int64_t>(words.size())}, DType::u32), root).wait();
  return std::string(reinterpret_cast<const char*>(words.data()), bytes);
}

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
  const std::string message = broadcast_text(group, error.value_or(""), first);
  throw UserError(fmt::format("rank {}: {}", group.ranks()[static_cast<std::size_t>(first)], message));
}

}  // namespace ustrain
