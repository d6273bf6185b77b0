#include "parallel/pipeline_validation.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "parallel/pipeline_simulation.h"

namespace ustrain {
namespace {

using Kind = ActionKind;

// What a transfer carries: (is a gradient, the receiving stage, the micro-batch).
using TransferKey = std::tuple<bool, int, int>;

// Every compute exactly once, on the rank that holds its stage ("" when so).
std::string check_computes(const PipelineProgram& program) {
  const PipelineShape& s = program.shape;
  const bool forward_only = [&] {
    for (const auto& actions : program.ranks)
      for (const PipelineAction& a : actions)
        if (is_compute(a.kind) && a.kind != Kind::forward) return false;
    return true;
  }();
  std::map<std::tuple<int, int, int>, int> count;  // (kind, stage, micro) -> times
  for (int r = 0; r < s.ranks; ++r)
    for (const PipelineAction& a : program.ranks[static_cast<std::size_t>(r)]) {
      if (a.chunk < 0 || a.chunk >= s.chunks || a.micro < 0 || a.micro >= s.micro_batches)
        return fmt::format("rank {} has {} of micro-batch {}, chunk {}: outside the shape", r, action_name(a.kind),
                           a.micro, a.chunk);
      if (!is_compute(a.kind)) continue;
      if (program.split_backward ? a.kind == Kind::backward : (a.kind == Kind::backward_input || a.kind == Kind::backward_weight))
        return fmt::format("rank {} has {}, which a program {} split backward does not run", r, action_name(a.kind),
                           program.split_backward ? "with" : "without");
      ++count[{static_cast<int>(a.kind), s.stage_of(r, a.chunk), a.micro}];
    }
  std::vector<Kind> kinds{Kind::forward};
  if (!forward_only) {
    if (program.split_backward) kinds.insert(kinds.end(), {Kind::backward_input, Kind::backward_weight});
    else kinds.push_back(Kind::backward);
  }
  for (Kind k : kinds)
    for (int stage = 0; stage < s.stages(); ++stage)
      for (int m = 0; m < s.micro_batches; ++m) {
        const int n = count[{static_cast<int>(k), stage, m}];
        if (n != 1)
          return fmt::format("{} of micro-batch {} on stage {} appears {} times, not once", action_name(k), m, stage, n);
      }
  return "";
}

// Every send has its receive on the peer, and every receive its send; data is received
// before it is used, and computed before it is sent ("" when so).
std::string check_transfers(const PipelineProgram& program) {
  const PipelineShape& s = program.shape;
  std::map<TransferKey, int> sends, recvs;
  for (int r = 0; r < s.ranks; ++r) {
    std::set<std::tuple<int, int, int>> computed, received;  // (kind, stage, micro)
    for (const PipelineAction& a : program.ranks[static_cast<std::size_t>(r)]) {
      const int stage = s.stage_of(r, a.chunk);
      switch (a.kind) {
        case Kind::send_activation:
        case Kind::send_grad: {
          const bool g = a.kind == Kind::send_grad;
          const int to = g ? stage - 1 : stage + 1;
          if (to < 0 || to >= s.stages() || a.peer != s.rank_of(to))
            return fmt::format("rank {} sends {} of micro-batch {} from stage {} to rank {}, which does not hold stage {}",
                               r, g ? "a gradient" : "an activation", a.micro, stage, a.peer, to);
          const Kind producer = g ? (program.split_backward ? Kind::backward_input : Kind::backward) : Kind::forward;
          if (!computed.count({static_cast<int>(producer), stage, a.micro}))
            return fmt::format("rank {} sends {} of micro-batch {} before computing it", r, action_name(a.kind), a.micro);
          ++sends[{g, to, a.micro}];
          break;
        }
        case Kind::recv_activation:
        case Kind::recv_grad: {
          const bool g = a.kind == Kind::recv_grad;
          const int from = g ? stage + 1 : stage - 1;
          if (from < 0 || from >= s.stages() || a.peer != s.rank_of(from))
            return fmt::format("rank {} receives for stage {} from rank {}, which does not hold stage {}", r, stage, a.peer,
                               from);
          ++recvs[{g, stage, a.micro}];
          received.insert({g, stage, a.micro});
          break;
        }
        default: {
          const bool needs_act = a.kind == Kind::forward && stage > 0;
          const bool needs_grad = (a.kind == Kind::backward || a.kind == Kind::backward_input) && stage < s.stages() - 1;
          if ((needs_act && !received.count({false, stage, a.micro})) || (needs_grad && !received.count({true, stage, a.micro})))
            return fmt::format("rank {} runs {} of micro-batch {} on stage {} before receiving its input", r,
                               action_name(a.kind), a.micro, stage);
          if (a.kind != Kind::forward && !computed.count({static_cast<int>(Kind::forward), stage, a.micro}))
            return fmt::format("rank {} runs {} of micro-batch {} on stage {} before its forward", r, action_name(a.kind),
                               a.micro, stage);
          if (a.kind == Kind::backward_weight && !computed.count({static_cast<int>(Kind::backward_input), stage, a.micro}))
            return fmt::format("rank {} runs W of micro-batch {} on stage {} before its B", r, a.micro, stage);
          computed.insert({static_cast<int>(a.kind), stage, a.micro});
        }
      }
    }
  }
  for (const auto& [key, n] : sends)
    if (n != 1 || recvs[key] != 1)
      return fmt::format("{} of micro-batch {} for stage {} is sent {} times and received {} times",
                         std::get<0>(key) ? "the gradient" : "the activation", std::get<2>(key), std::get<1>(key), n,
                         recvs[key]);
  for (const auto& [key, n] : recvs)
    if (sends[key] != 1)
      return fmt::format("{} of micro-batch {} for stage {} is received but never sent",
                         std::get<0>(key) ? "the gradient" : "the activation", std::get<2>(key), std::get<1>(key));
  return "";
}

}  // namespace

std::string validate_pipeline_program(const PipelineProgram& program) {
  const PipelineShape& s = program.shape;
  if (static_cast<int>(program.ranks.size()) != s.ranks)
    return fmt::format("the program has {} ranks, the shape {}", program.ranks.size(), s.ranks);
  if (std::string problem = check_computes(program); !problem.empty()) return problem;
  if (std::string problem = check_transfers(program); !problem.empty()) return problem;
  return replay_pipeline(program, ActionCosts{}).stuck;
}

}  // namespace ustrain
