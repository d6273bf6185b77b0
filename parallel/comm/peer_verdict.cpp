#include "parallel/comm/peer_verdict.h"

#include <fmt/format.h>

#include <map>

namespace ustrain {
namespace {

// "rank 3" or "ranks 1,3"
std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ","));
}

}  // namespace

PeerVerdict judge(const std::vector<PeerAnswer>& answers, const std::string& window) {
  std::vector<int> silent;
  std::map<std::string, std::vector<int>> behind;  // activity -> the ranks doing it, in order
  std::vector<std::string> order;
  for (const PeerAnswer& a : answers) {
    if (!a.answered) {
      silent.push_back(a.rank);
    } else if (!a.started) {
      auto& ranks = behind[a.activity];
      if (ranks.empty()) order.push_back(a.activity);
      ranks.push_back(a.rank);
    }
  }
  PeerVerdict v;
  std::vector<std::string> parts;
  if (!silent.empty())
    parts.push_back(fmt::format("{} did not answer within {}: stopped (SIGSTOP, a debugger), hung, dead, "
                                "unreachable, or too overloaded to answer in time",
                                ranks_text(silent), window));
  for (const std::string& activity : order)
    parts.push_back(fmt::format("{} {} not reached this operation ({})", ranks_text(behind[activity]),
                                behind[activity].size() == 1 ? "has" : "have", activity));
  if (parts.empty()) {
    v.explanation = "every member has started this operation, so none is missing: the transport between them stalled";
    return v;
  }
  v.keep_waiting = silent.empty();
  v.explanation = fmt::format("{}", fmt::join(parts, "; "));
  return v;
}

}  // namespace ustrain
