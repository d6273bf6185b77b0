#include "parallel/communicator.h"

#include <fmt/format.h>

#include <algorithm>

namespace ustrain {

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "avg"; }

ShardLayout::ShardLayout(std::int64_t n, int p) : numel(n), parts(p) {
  USTRAIN_ASSERT(n >= 0 && p >= 1, "shard layout needs numel >= 0 and parts >= 1");
  shard = (n + p - 1) / p;
  padded = shard * p;
}

std::int64_t ShardLayout::real_in(int part) const {
  return std::clamp<std::int64_t>(numel - begin(part), 0, shard);
}

namespace {
class FailedWork final : public WorkState {
 public:
  explicit FailedWork(std::string message) : message_(std::move(message)) {}
  void wait() override { throw CommError(message_); }
  bool test() override { throw CommError(message_); }

 private:
  std::string message_;
};
}  // namespace

Work Work::failed(std::string message) { return Work(std::make_shared<FailedWork>(std::move(message))); }

void wait_all(std::span<Work> works) {
  for (Work& w : works) w.wait();
}

std::string describe_group(const std::string& label, const std::vector<int>& ranks) {
  constexpr std::size_t kShown = 8;  // long groups: first six, an ellipsis, the last one
  std::string list;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks.size() > kShown && i == kShown - 2) {
      list += fmt::format(",...,{} ({} ranks)", ranks.back(), ranks.size());
      break;
    }
    list += fmt::format("{}{}", i ? "," : "", ranks[i]);
  }
  return fmt::format("{} group ({} {})", label, ranks.size() == 1 ? "rank" : "ranks", list);
}

std::string describe_duration(std::chrono::milliseconds d) {
  const double s = static_cast<double>(d.count()) / 1000.0;
  return fmt::format("{:g} s", s);
}

std::string timeout_message(const std::string& operation, const std::string& group, int global_rank,
                            std::chrono::milliseconds timeout) {
  return fmt::format(
      "{} on {} did not complete within {} on rank {}: a peer may have died or be stuck. Check the "
      "other ranks' output for the first error; if steps legitimately take longer, raise the "
      "communication timeout",
      operation, group, describe_duration(timeout), global_rank);
}

}  // namespace ustrain
