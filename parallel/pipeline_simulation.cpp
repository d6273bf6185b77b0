#include "parallel/pipeline_simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "kernels/error.h"

namespace ustrain {
namespace {

using Kind = ActionKind;

// What a transfer carries: (is a gradient, the receiving stage, the micro-batch).
using TransferKey = std::tuple<bool, int, int>;

double cost_of(Kind k, const ActionCosts& c) {
  switch (k) {
    case Kind::forward: return c.forward;
    case Kind::backward: return c.backward_input + c.backward_weight;
    case Kind::backward_input: return c.backward_input;
    case Kind::backward_weight: return c.backward_weight;
    default: return 0;
  }
}

}  // namespace

PipelineReplay replay_pipeline(const PipelineProgram& program, const ActionCosts& costs) {
  const auto& shape = program.shape;
  return replay_pipeline(program, StageCosts(static_cast<std::size_t>(shape.ranks),
                                             std::vector<ActionCosts>(static_cast<std::size_t>(shape.chunks), costs)));
}

PipelineReplay replay_pipeline(const PipelineProgram& program, const StageCosts& stage_costs) {
  const PipelineShape& s = program.shape;
  const auto P = static_cast<std::size_t>(s.ranks);
  PipelineReplay out;
  PipelineSimulation& sim = out.result;
  sim.busy.assign(P, 0);
  sim.peak_slots.assign(P, 0);
  sim.peak_chunk_slots.assign(P, std::vector<int>(static_cast<std::size_t>(s.chunks), 0));
  sim.peak_receive_buffers = sim.peak_chunk_slots;
  std::vector<std::vector<int>> waiting = sim.peak_chunk_slots;  // receive buffers in use
  sim.spans.assign(P, {});
  std::vector<std::size_t> pc(P, 0);
  std::vector<double> free(P, 0);
  std::vector<int> alive(P, 0);
  std::vector<std::vector<int>> chunk_alive(P, std::vector<int>(static_cast<std::size_t>(s.chunks), 0));
  std::map<TransferKey, double> arrival;            // data sent: when it is usable
  // Without backward passes (evaluation) a micro-batch's activations die with its forward.
  const bool forward_only = std::none_of(program.ranks.begin(), program.ranks.end(), [](const auto& actions) {
    return std::any_of(actions.begin(), actions.end(),
                       [](const PipelineAction& a) { return is_compute(a.kind) && a.kind != Kind::forward; });
  });
  std::set<std::tuple<int, int, int>> done;         // (kind, stage, micro) computed
  const auto live = [&](std::size_t r, int chunk, int delta) {
    alive[r] += delta;
    chunk_alive[r][static_cast<std::size_t>(chunk)] += delta;
    sim.peak_slots[r] = std::max(sim.peak_slots[r], alive[r]);
    auto& peak = sim.peak_chunk_slots[r][static_cast<std::size_t>(chunk)];
    peak = std::max(peak, chunk_alive[r][static_cast<std::size_t>(chunk)]);
  };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (std::size_t r = 0; r < P; ++r) {
      const auto& actions = program.ranks[r];
      while (pc[r] < actions.size()) {
        const PipelineAction& a = actions[pc[r]];
        const int stage = s.stage_of(static_cast<int>(r), a.chunk);
        const ActionCosts& costs = stage_costs[r][static_cast<std::size_t>(a.chunk)];
        double start = free[r];
        if (a.kind == Kind::send_activation || a.kind == Kind::send_grad) {
          const bool g = a.kind == Kind::send_grad;
          arrival[{g, g ? stage - 1 : stage + 1, a.micro}] = free[r] + costs.transfer;
        } else if (a.kind == Kind::recv_activation || a.kind == Kind::recv_grad) {
          int& n = waiting[r][static_cast<std::size_t>(a.chunk)];
          auto& peak = sim.peak_receive_buffers[r][static_cast<std::size_t>(a.chunk)];
          peak = std::max(peak, ++n);
        } else {
          // A compute: wait for its data.
          const auto need = [&](bool g) -> bool {
            const auto it = arrival.find({g, stage, a.micro});
            if (it == arrival.end()) return false;
            start = std::max(start, it->second);
            return true;
          };
          if (a.kind == Kind::forward && stage > 0 && !need(false)) break;
          if ((a.kind == Kind::backward || a.kind == Kind::backward_input) && stage < s.stages() - 1 && !need(true))
            break;
          const bool received = (a.kind == Kind::forward && stage > 0) ||
                                ((a.kind == Kind::backward || a.kind == Kind::backward_input) && stage < s.stages() - 1);
          if (received) --waiting[r][static_cast<std::size_t>(a.chunk)];
          if (a.kind == Kind::forward) live(r, a.chunk, +1);
          const double end = start + cost_of(a.kind, costs);
          sim.spans[r].emplace_back(start, end);
          sim.busy[r] += end - start;
          free[r] = end;
          done.insert({static_cast<int>(a.kind), stage, a.micro});
          if (a.kind == Kind::backward || a.kind == Kind::backward_weight || forward_only) live(r, a.chunk, -1);
        }
        ++pc[r];
        progressed = true;
      }
    }
  }
  for (std::size_t r = 0; r < P; ++r)
    if (pc[r] < program.ranks[r].size()) {
      const PipelineAction& a = program.ranks[r][pc[r]];
      out.stuck = fmt::format("pipeline rank {} waits forever at action {} ({} of micro-batch {}, chunk {}): the data it "
                              "needs is never sent",
                              r, pc[r], action_name(a.kind), a.micro, a.chunk);
      return out;
    }
  double idle = 0, busy = 0;
  for (std::size_t r = 0; r < P; ++r) sim.makespan = std::max(sim.makespan, free[r]);
  for (std::size_t r = 0; r < P; ++r) {
    idle += sim.makespan - sim.busy[r];
    busy += sim.busy[r];
  }
  sim.bubble = busy > 0 ? idle / busy : 0;
  return out;
}

PipelineSimulation simulate_pipeline(const PipelineProgram& program, const ActionCosts& costs) {
  PipelineReplay r = replay_pipeline(program, costs);
  USTRAIN_ASSERT(r.stuck.empty(), "simulating an invalid pipeline program: " + r.stuck);
  return std::move(r.result);
}

PipelineSimulation simulate_pipeline(const PipelineProgram& program, const StageCosts& costs) {
  USTRAIN_ASSERT(costs.size() == static_cast<std::size_t>(program.shape.ranks), "costs for another pipeline");
  PipelineReplay r = replay_pipeline(program, costs);
  USTRAIN_ASSERT(r.stuck.empty(), "simulating an invalid pipeline program: " + r.stuck);
  return std::move(r.result);
}

}  // namespace ustrain
