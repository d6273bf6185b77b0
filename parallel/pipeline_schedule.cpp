#include "parallel/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>

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

}  // namespace ustrain
