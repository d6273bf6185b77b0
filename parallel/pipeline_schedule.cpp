#include "parallel/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "kernels/error.h"

namespace ustrain {
namespace {

using Kind = ActionKind;

PipelineAction compute(Kind kind, int micro, int chunk) { return {kind, micro, chunk, -1}; }

// ---- The compute order of each schedule (communication is added afterwards) ---------------

std::vector<PipelineAction> afab_order(const PipelineShape& s) {
  std::vector<PipelineAction> order;
  for (int m = 0; m < s.micro_batches; ++m) order.push_back(compute(Kind::forward, m, 0));
  for (int m = 0; m < s.micro_batches; ++m) order.push_back(compute(Kind::backward, m, 0));
  return order;
}

// PipeDream-flush: rank r runs P - r - 1 warm-up forwards, then one forward and one backward
// at a time, then the remaining backwards.
std::vector<PipelineAction> one_f_one_b_order(const PipelineShape& s, int rank) {
  const int m = s.micro_batches, warmup = std::min(s.ranks - rank - 1, m);
  std::vector<PipelineAction> order;
  for (int i = 0; i < warmup; ++i) order.push_back(compute(Kind::forward, i, 0));
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back(compute(Kind::forward, warmup + i, 0));
    order.push_back(compute(Kind::backward, i, 0));
  }
  for (int i = m - warmup; i < m; ++i) order.push_back(compute(Kind::backward, i, 0));
  return order;
}

// Megatron's interleaved 1F1B: micro-batches go through the chunks in groups of P, forward
// chunk by chunk, backward in reverse chunk order; the warm-up is longer by a round of chunks.
std::vector<PipelineAction> interleaved_order(const PipelineShape& s, int rank) {
  const int p = s.ranks, v = s.chunks, total = s.micro_batches * v;
  const auto micro_of = [&](int k) { return (k / (p * v)) * p + k % p; };
  const auto forward_at = [&](int k) { return compute(Kind::forward, micro_of(k), (k / p) % v); };
  const auto backward_at = [&](int k) { return compute(Kind::backward, micro_of(k), v - 1 - (k / p) % v); };
  const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  std::vector<PipelineAction> order;
  for (int k = 0; k < warmup; ++k) order.push_back(forward_at(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(forward_at(warmup + k));
    order.push_back(backward_at(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(backward_at(k));
  return order;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B with the backward split into B
// (input gradients, on the critical path) and W (weight gradients, needed by nobody
// downstream). Each rank keeps 1F1B's order of F and B passes and runs a pending W whenever
// the next of them would wait for its data, or before a forward that would keep more than P
// micro-batches alive (1F1B's peak memory); the W passes left over close the step. Built by
// replaying the order with equal costs, so the W passes fill what would be 1F1B's bubbles.
std::vector<std::vector<PipelineAction>> zero_bubble_orders(const PipelineShape& s) {
  const int p = s.ranks, m = s.micro_batches;
  const auto P = static_cast<std::size_t>(p);
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<std::vector<PipelineAction>> fb(P), orders(P);
  for (int r = 0; r < p; ++r)
    for (PipelineAction a : one_f_one_b_order(s, r)) {
      if (a.kind == Kind::backward) a.kind = Kind::backward_input;
      fb[static_cast<std::size_t>(r)].push_back(a);
    }
  // When micro-batch j's activation reaches rank r, and its gradient.
  std::vector<std::vector<double>> act(P, std::vector<double>(static_cast<std::size_t>(m), kNever)), grad = act;
  for (auto& t : act[0]) t = 0;
  std::vector<double> free(P, 0);
  std::vector<std::size_t> next(P, 0);
  std::vector<int> alive(P, 0);
  std::vector<std::deque<int>> pending_w(P);
  // Rank r's next action and when it can start; false when the rank is done.
  const auto next_of = [&](std::size_t r, PipelineAction* action, double* start) {
    const bool has_w = !pending_w[r].empty();
    const PipelineAction w = has_w ? compute(Kind::backward_weight, pending_w[r].front(), 0) : PipelineAction{};
    if (next[r] == fb[r].size()) {
      *action = w, *start = free[r];
      return has_w;
    }
    const PipelineAction& x = fb[r][next[r]];
    if (x.kind == Kind::forward && alive[r] >= p) {
      *action = w, *start = free[r];
      return true;
    }
    const auto j = static_cast<std::size_t>(x.micro);
    const double data = x.kind == Kind::forward ? act[r][j] : r + 1 == P ? 0 : grad[r][j];
    *action = x, *start = std::max(free[r], data);
    if (*start > free[r] && has_w) *action = w, *start = free[r];
    return true;
  };
  for (int left = 3 * p * m; left > 0; --left) {
    std::size_t r = P;
    double start = kNever;
    PipelineAction action;
    for (std::size_t q = 0; q < P; ++q) {
      PipelineAction a;
      double t = kNever;
      if (next_of(q, &a, &t) && t < start) r = q, start = t, action = a;
    }
    USTRAIN_ASSERT(r < P, "the zero-bubble construction stalled");
    const double end = start + 1;
    const auto j = static_cast<std::size_t>(action.micro);
    if (action.kind == Kind::backward_weight) {
      pending_w[r].pop_front();
      --alive[r];
    } else {
      ++next[r];
      if (action.kind == Kind::forward) {
        ++alive[r];
        if (r + 1 < P) act[r + 1][j] = end;
      } else {
        pending_w[r].push_back(action.micro);
        if (r > 0) grad[r - 1][j] = end;
      }
    }
    orders[r].push_back(action);
    free[r] = end;
  }
  return orders;
}

// ---- Communication -----------------------------------------------------------------------

// Adds the sends after the computes that produce data for another stage, and posts each
// receive one compute before the compute that uses it, so the transfer runs under that compute.
std::vector<PipelineAction> with_communication(const PipelineShape& s, int rank,
                                               const std::vector<PipelineAction>& order) {
  const int stages = s.stages();
  const auto recv_for = [&](const PipelineAction& a, PipelineAction* out) {
    const int stage = s.stage_of(rank, a.chunk);
    if (a.kind == Kind::forward && stage > 0) {
      *out = {Kind::recv_activation, a.micro, a.chunk, s.rank_of(stage - 1)};
      return true;
    }
    if ((a.kind == Kind::backward || a.kind == Kind::backward_input) && stage < stages - 1) {
      *out = {Kind::recv_grad, a.micro, a.chunk, s.rank_of(stage + 1)};
      return true;
    }
    return false;
  };
  std::vector<PipelineAction> out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const PipelineAction& a = order[i];
    PipelineAction recv;
    if (i == 0 && recv_for(a, &recv)) out.push_back(recv);
    if (i + 1 < order.size() && recv_for(order[i + 1], &recv)) out.push_back(recv);
    out.push_back(a);
    const int stage = s.stage_of(rank, a.chunk);
    if (a.kind == Kind::forward && stage < stages - 1)
      out.push_back({Kind::send_activation, a.micro, a.chunk, s.rank_of(stage + 1)});
    if ((a.kind == Kind::backward || a.kind == Kind::backward_input) && stage > 0)
      out.push_back({Kind::send_grad, a.micro, a.chunk, s.rank_of(stage - 1)});
  }
  return out;
}

PipelineProgram finish(PipelineSchedule schedule, const PipelineShape& shape, bool split,
                       const std::vector<std::vector<PipelineAction>>& orders) {
  PipelineProgram program{schedule, shape, split, {}};
  for (int r = 0; r < shape.ranks; ++r)
    program.ranks.push_back(with_communication(shape, r, orders[static_cast<std::size_t>(r)]));
  return program;
}

// ---- Replay ------------------------------------------------------------------------------

// What a transfer carries: (is a gradient, the receiving stage, the micro-batch).
using TransferKey = std::tuple<bool, int, int>;

struct Replay {
  PipelineSimulation result;
  std::string stuck;  // why the replay could not finish; empty when it did
};

double cost_of(Kind k, const ActionCosts& c) {
  switch (k) {
    case Kind::forward: return c.forward;
    case Kind::backward: return c.backward_input + c.backward_weight;
    case Kind::backward_input: return c.backward_input;
    case Kind::backward_weight: return c.backward_weight;
    default: return 0;
  }
}

Replay replay(const PipelineProgram& program, const ActionCosts& costs) {
  const PipelineShape& s = program.shape;
  const auto P = static_cast<std::size_t>(s.ranks);
  Replay out;
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

}  // namespace

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "afab") return PipelineSchedule::afab;
  if (name == "1f1b") return PipelineSchedule::one_f_one_b;
  if (name == "interleaved") return PipelineSchedule::interleaved;
  if (name == "zero-bubble") return PipelineSchedule::zero_bubble;
  throw UserError("parallel.pp_schedule must be afab, 1f1b, interleaved or zero-bubble (got \"" + name + "\")");
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::afab: return "afab";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved";
    case PipelineSchedule::zero_bubble: return "zero-bubble";
  }
  return "?";
}

const char* action_name(ActionKind k) {
  switch (k) {
    case Kind::forward: return "F";
    case Kind::backward: return "BW";
    case Kind::backward_input: return "B";
    case Kind::backward_weight: return "W";
    case Kind::send_activation: return "send-activation";
    case Kind::recv_activation: return "recv-activation";
    case Kind::send_grad: return "send-gradient";
    case Kind::recv_grad: return "recv-gradient";
  }
  return "?";
}

bool is_compute(ActionKind k) {
  return k == Kind::forward || k == Kind::backward || k == Kind::backward_input || k == Kind::backward_weight;
}

std::string schedule_refusal(PipelineSchedule schedule, const PipelineShape& s) {
  if (s.ranks < 1 || s.chunks < 1 || s.micro_batches < 1) return "a pipeline needs at least one rank, chunk and micro-batch";
  if (schedule == PipelineSchedule::interleaved) {
    if (s.ranks < 2)
      return "the interleaved schedule needs parallel.pp >= 2: it alternates chunks between pipeline ranks";
    if (s.chunks < 2)
      return fmt::format("the interleaved schedule needs parallel.virtual_stages >= 2 (got {})", s.chunks);
    if (s.micro_batches % s.ranks != 0)
      return fmt::format("the interleaved schedule sends micro-batches through the chunks in groups of parallel.pp = {}, "
                         "so the micro-batches per step ({}) must be a multiple of {}",
                         s.ranks, s.micro_batches, s.ranks);
    return "";
  }
  if (s.chunks != 1)
    return fmt::format("parallel.virtual_stages = {} needs parallel.pp_schedule = \"interleaved\"; the {} schedule runs "
                       "one chunk per rank",
                       s.chunks, pipeline_schedule_name(schedule));
  return "";
}

PipelineProgram make_pipeline_program(PipelineSchedule schedule, const PipelineShape& shape) {
  const std::string refusal = schedule_refusal(schedule, shape);
  USTRAIN_ASSERT(refusal.empty(), refusal);
  std::vector<std::vector<PipelineAction>> orders;
  if (schedule == PipelineSchedule::zero_bubble) return finish(schedule, shape, true, zero_bubble_orders(shape));
  for (int r = 0; r < shape.ranks; ++r) {
    switch (schedule) {
      case PipelineSchedule::afab: orders.push_back(afab_order(shape)); break;
      case PipelineSchedule::one_f_one_b: orders.push_back(one_f_one_b_order(shape, r)); break;
      case PipelineSchedule::interleaved: orders.push_back(interleaved_order(shape, r)); break;
      case PipelineSchedule::zero_bubble: break;
    }
  }
  return finish(schedule, shape, false, orders);
}

PipelineProgram make_forward_program(const PipelineShape& shape) {
  std::vector<std::vector<PipelineAction>> orders(static_cast<std::size_t>(shape.ranks));
  // Micro-batch by micro-batch, each through the rank's chunks in stage order.
  for (int m = 0; m < shape.micro_batches; ++m)
    for (int c = 0; c < shape.chunks; ++c)
      for (int r = 0; r < shape.ranks; ++r) orders[static_cast<std::size_t>(r)].push_back(compute(Kind::forward, m, c));
  return finish(PipelineSchedule::afab, shape, false, orders);
}

std::string validate_pipeline_program(const PipelineProgram& program) {
  const PipelineShape& s = program.shape;
  if (static_cast<int>(program.ranks.size()) != s.ranks)
    return fmt::format("the program has {} ranks, the shape {}", program.ranks.size(), s.ranks);
  const bool forward_only = [&] {
    for (const auto& actions : program.ranks)
      for (const PipelineAction& a : actions)
        if (is_compute(a.kind) && a.kind != Kind::forward) return false;
    return true;
  }();
  // Every compute exactly once, on the rank that holds its stage.
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
  // Every send has its receive on the peer, and every receive its send; data is received
  // before it is used, and computed before it is sent.
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
  return replay(program, ActionCosts{}).stuck;
}

PipelineSimulation simulate_pipeline(const PipelineProgram& program, const ActionCosts& costs) {
  Replay r = replay(program, costs);
  USTRAIN_ASSERT(r.stuck.empty(), "simulating an invalid pipeline program: " + r.stuck);
  return std::move(r.result);
}

std::string draw_pipeline_timeline(const PipelineProgram& program, int width) {
  const PipelineSimulation sim = simulate_pipeline(program, ActionCosts{});
  const PipelineShape& s = program.shape;
  // One cell per time unit, wide enough for the longest label ("F12/3").
  const int label = 1 + static_cast<int>(std::to_string(s.micro_batches - 1).size()) +
                    (s.chunks > 1 ? 1 + static_cast<int>(std::to_string(s.chunks - 1).size()) : 0);
  const int cell = label + 1;
  const auto units = static_cast<int>(sim.makespan + 0.5);
  std::string out;
  for (int r = 0; r < s.ranks; ++r) {
    std::vector<std::string> cells(static_cast<std::size_t>(units), std::string(static_cast<std::size_t>(label), '.'));
    std::size_t k = 0;
    for (const PipelineAction& a : program.ranks[static_cast<std::size_t>(r)]) {
      if (!is_compute(a.kind)) continue;
      const auto [start, end] = sim.spans[static_cast<std::size_t>(r)][k++];
      const char letter = a.kind == Kind::forward ? 'F' : a.kind == Kind::backward_weight ? 'W' : 'B';
      std::string text = fmt::format("{}{}", letter, a.micro);
      if (s.chunks > 1) text += fmt::format("/{}", a.chunk);
      text.resize(static_cast<std::size_t>(label), ' ');
      for (int t = static_cast<int>(start + 0.5); t < static_cast<int>(end + 0.5); ++t) cells[static_cast<std::size_t>(t)] = text;
    }
    std::string row = fmt::format("rank {:<2} |", r);
    for (const std::string& c : cells) {
      if (static_cast<int>(row.size()) + cell > width) {
        row += " ...";
        break;
      }
      row += " " + c;
    }
    out += row + "\n";
  }
  out += fmt::format("{} schedule, {} rank(s) x {} chunk(s), {} micro-batches; F forward, {} backward; one column per "
                     "unit of time with equal costs; bubble {:.3f} of the compute time\n",
                     pipeline_schedule_name(program.schedule), s.ranks, s.chunks, s.micro_batches,
                     program.split_backward ? "B input and W weight" : "B (two units: input and weight)", sim.bubble);
  return out;
}

}  // namespace ustrain
