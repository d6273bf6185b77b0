#include "parallel/pipeline_simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
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

// One replay of a program: each rank runs its actions in order as far as its data allows;
// a compute starts when its rank is free and its input has arrived.
class Replayer {
 public:
  Replayer(const PipelineProgram& program, const StageCosts& stage_costs)
      : program_(program), s_(program.shape), costs_(stage_costs), P_(static_cast<std::size_t>(s_.ranks)) {
    PipelineSimulation& sim = out_.result;
    sim.busy.assign(P_, 0);
    sim.peak_slots.assign(P_, 0);
    sim.peak_chunk_slots.assign(P_, std::vector<int>(static_cast<std::size_t>(s_.chunks), 0));
    sim.peak_receive_buffers = sim.peak_chunk_slots;
    waiting_ = sim.peak_chunk_slots;
    chunk_alive_ = sim.peak_chunk_slots;
    sim.spans.assign(P_, {});
    pc_.assign(P_, 0);
    free_.assign(P_, 0);
    alive_.assign(P_, 0);
    // Without backward passes (evaluation) a micro-batch's activations die with its forward.
    forward_only_ = std::none_of(program.ranks.begin(), program.ranks.end(), [](const auto& actions) {
      return std::any_of(actions.begin(), actions.end(),
                         [](const PipelineAction& a) { return is_compute(a.kind) && a.kind != Kind::forward; });
    });
  }

  PipelineReplay run() {
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (std::size_t r = 0; r < P_; ++r)
        while (pc_[r] < program_.ranks[r].size() && advance(r)) progressed = true;
    }
    for (std::size_t r = 0; r < P_; ++r)
      if (pc_[r] < program_.ranks[r].size()) {
        const PipelineAction& a = program_.ranks[r][pc_[r]];
        out_.stuck = fmt::format("pipeline rank {} waits forever at action {} ({} of micro-batch {}, chunk {}): the "
                                 "data it needs is never sent",
                                 r, pc_[r], action_name(a.kind), a.micro, a.chunk);
        return out_;
      }
    PipelineSimulation& sim = out_.result;
    double idle = 0, busy = 0;
    for (std::size_t r = 0; r < P_; ++r) sim.makespan = std::max(sim.makespan, free_[r]);
    for (std::size_t r = 0; r < P_; ++r) {
      idle += sim.makespan - sim.busy[r];
      busy += sim.busy[r];
    }
    sim.bubble = busy > 0 ? idle / busy : 0;
    return out_;
  }

 private:
  // Runs rank r's next action; false when it must wait for data not yet sent.
  bool advance(std::size_t r) {
    const PipelineAction& a = program_.ranks[r][pc_[r]];
    const int stage = s_.stage_of(static_cast<int>(r), a.chunk);
    const auto chunk = static_cast<std::size_t>(a.chunk);
    if (a.kind == Kind::send_activation || a.kind == Kind::send_grad) {
      const bool g = a.kind == Kind::send_grad;
      arrival_[{g, g ? stage - 1 : stage + 1, a.micro}] = free_[r] + costs_[r][chunk].transfer;
    } else if (a.kind == Kind::recv_activation || a.kind == Kind::recv_grad) {
      auto& peak = out_.result.peak_receive_buffers[r][chunk];
      peak = std::max(peak, ++waiting_[r][chunk]);
    } else if (!compute(r, a, stage)) {
      return false;
    }
    ++pc_[r];
    return true;
  }

  bool compute(std::size_t r, const PipelineAction& a, int stage) {
    const bool needs_activation = a.kind == Kind::forward && stage > 0;
    const bool needs_grad = (a.kind == Kind::backward || a.kind == Kind::backward_input) && stage < s_.stages() - 1;
    double start = free_[r];
    if (needs_activation || needs_grad) {
      const auto it = arrival_.find({needs_grad, stage, a.micro});
      if (it == arrival_.end()) return false;
      start = std::max(start, it->second);
      --waiting_[r][static_cast<std::size_t>(a.chunk)];
    }
    if (a.kind == Kind::forward) live(r, a.chunk, +1);
    const double end = start + cost_of(a.kind, costs_[r][static_cast<std::size_t>(a.chunk)]);
    PipelineSimulation& sim = out_.result;
    sim.spans[r].emplace_back(start, end);
    sim.busy[r] += end - start;
    free_[r] = end;
    if (a.kind == Kind::backward || a.kind == Kind::backward_weight || forward_only_) live(r, a.chunk, -1);
    return true;
  }

  // Activations a micro-batch keeps alive on rank r: counted, with their peaks.
  void live(std::size_t r, int chunk, int delta) {
    PipelineSimulation& sim = out_.result;
    alive_[r] += delta;
    int& in_chunk = chunk_alive_[r][static_cast<std::size_t>(chunk)];
    in_chunk += delta;
    sim.peak_slots[r] = std::max(sim.peak_slots[r], alive_[r]);
    int& peak = sim.peak_chunk_slots[r][static_cast<std::size_t>(chunk)];
    peak = std::max(peak, in_chunk);
  }

  const PipelineProgram& program_;
  const PipelineShape& s_;
  const StageCosts& costs_;
  const std::size_t P_;
  PipelineReplay out_;
  std::vector<std::size_t> pc_;                // each rank's next action
  std::vector<double> free_;                   // when each rank is next free
  std::vector<int> alive_;                     // activations alive per rank
  std::vector<std::vector<int>> chunk_alive_;  // ... and per chunk
  std::vector<std::vector<int>> waiting_;      // receive buffers in use
  std::map<TransferKey, double> arrival_;      // data sent: when it is usable
  bool forward_only_ = false;
};
}  // namespace

PipelineReplay replay_pipeline(const PipelineProgram& program, const ActionCosts& costs) {
  const auto& shape = program.shape;
  return replay_pipeline(program, StageCosts(static_cast<std::size_t>(shape.ranks),
                                             std::vector<ActionCosts>(static_cast<std::size_t>(shape.chunks), costs)));
}

PipelineReplay replay_pipeline(const PipelineProgram& program, const StageCosts& stage_costs) {
  return Replayer(program, stage_costs).run();
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
