// Expert parallelism's token exchange: the rows a rank routed to experts that other members of
// its ep group own go there, the owners run their experts on them, and the results come back.
//
// A mixture-of-experts layer hands the dispatcher its rows in expert order (every choice of
// every token, grouped by expert: core/model/expert_order.h) with the count of each expert,
// and an ExpertCompute that runs one expert on some rows. Member r of the ep group owns the
// experts [r E/ep, (r + 1) E/ep) (ExpertPlacement), so the rows for one member are contiguous.
//
// Forward, per layer and micro-batch:
//   1. counts: every member's per-expert counts are all-gathered (ep x E integers), so every
//      member plans the same rounds (below) without asking again;
//   2. per round: the rows travel to their owners by one all-to-all-v, the owner runs each
//      (source, expert) run of its received rows through the expert, and the results return by
//      the inverse all-to-all-v to where the rows came from, in expert order.
// Backward mirrors it: per round the rows travel again with their output gradients, the owner
// recomputes what the expert needs (the rows are not kept between the passes, see below),
// accumulates the expert's weight gradients and returns the input gradients.
//
// Dropless under a static memory plan: a member receives at most `capacity` rows per round (the
// rows of the receive buffers the caller plans and hands in, DispatchBuffers). A member whose
// incoming rows R exceed it takes ceil(R / capacity) rounds; every member runs the most rounds
// any member needs (the exchanges are collective). Round t carries positions [t C, (t + 1) C)
// of every member's incoming stream, which lists the sources in member order and, within a
// source, its rows in expert order. Nothing is dropped and every row meets the same expert whatever the rounds
// (they change only how rows are batched into GEMMs). DispatchStats counts the rounds past the
// first.
//
// Memory: the receiving side holds C rows of inputs, results and (backward) output gradients
// (under tp also the gathered sub-pieces, gathered_rows()); the sending side one buffer of the
// rows it routes. The rows an owner receives are not kept
// for the backward pass (that would need ep x N k rows, unbounded by the plan); backward sends
// them again and the expert recomputes its activations from them.
//
// Under tensor parallelism (tp > 1, with sequence parallelism) every tp rank of one (dp, cp)
// position routes the same rows, and each holds a 1/tp column shard of every expert's hidden
// units, so an owner's outputs are partial sums over its tp group. The tp ranks share the
// traffic: every (source, destination) piece of a round is cut into tp contiguous sub-pieces
// and tp rank u sends only sub-piece u over its ep group (whose members share its tp index).
// The owner all-gathers over tp what its tp group received, which restores each source's
// piece in stream order (every tp rank knows every peer's sub-piece sizes from the same count
// table), runs its shard of the experts on all of the round's rows as at tp = 1 (the shard's
// weight gradients need every row), reduce-scatters the partial results over tp so that tp
// rank u holds the full sums of the sub-piece u rows, and returns those. The caller's tp rank u
// thus gets full results for its sub-piece rows and writes zeros for the other tp ranks' rows;
// the rows routed to its own experts it computes in place as partial sums (every tp rank
// does). Both are partial sums over tp of the full results (full on one rank and zero on the
// others is one), which is what the MoE layer already hands to its tp reduce. Per rank, the
// ep all-to-all moves 1/tp of the rows; the tp all-gather and reduce-scatter move the round's
// received rows once each. Backward sends sub-piece u of the rows and of their output
// gradients, gathers both, and returns the full input gradients of sub-piece u's rows.
//
// In a group of one (ep = 1) every expert is local: the ExpertCompute runs on all of the
// caller's rows at once, in place (ExpertCompute::forward_all), no buffer is touched, nothing
// moves and the capacity plays no part, as the ring at cp = 1 issues one self block.
//
// What overlaps: within a layer and micro-batch, each round's exchanges with compute that needs
// none of the incoming rows. Forward: while the rows travel, the caller's `alongside` work (the
// MoE layer's shared experts) and then this rank's own rows on its own experts, which never
// leave it (they are computed from and into the caller's tensors). Backward: the caller's work
// under the rows' exchange, this rank's own rows under their gradients'. The results' return
// is waited for at once; one micro-batch's exchange does not run under another's compute (a
// layer returns only when its results are home). DispatchStats::wait_seconds is what was left
// exposed on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

// Which experts each member of an ep group owns: contiguous blocks of E / ep.
struct ExpertPlacement {
  int n_experts = 1;  // E, a multiple of members
  int members = 1;    // ep
  int member = 0;     // this rank in the ep group
  int per_member() const { return n_experts / members; }
  int first() const { return member * per_member(); }  // this member's first expert
  int owner(int expert) const { return expert / per_member(); }
  bool owns(int expert) const { return owner(expert) == member; }
};

// One expert on some rows, run on the member that owns it (the MoE layer's expert GEMMs).
// Runs hold at most max(the caller's rows, capacity) rows.
class ExpertCompute {
 public:
  virtual ~ExpertCompute() = default;
  // out (c, D) = the expert's output for rows `in` (c, D).
  virtual void forward(Backend& be, int expert, Tensor out, Tensor in) = 0;
  // d_in (c, D), overwritten, from the output gradients d_out (c, D) of rows `in` (c, D); adds
  // the expert's weight gradients from them.
  virtual void backward(Backend& be, int expert, Tensor d_in, Tensor d_out, Tensor in) = 0;

  // A group of one: every expert on all of the caller's rows (n, D) at once, counts[e] rows of
  // expert e in expert order. By default expert after expert through forward() and backward();
  // a layer that keeps its experts' activations for its backward (or defers their weight
  // gradients to backward_weight_all()) runs them here on its own tensors.
  virtual void forward_all(Backend& be, std::span<const std::int64_t> counts, Tensor out, Tensor in);
  virtual void backward_all(Backend& be, std::span<const std::int64_t> counts, Tensor d_in, Tensor d_out, Tensor in);
  // The weight gradients a split backward left in a group of one (backward_all deferred them).
  virtual void backward_weight_all(Backend&, std::span<const std::int64_t>) {}
};

// The planned buffers of a dispatch of D-wide rows (a group of one needs none). The capacity C
// is the rows of recv, recv_grad and result: a round's rows from every source together.
struct DispatchBuffers {
  Tensor send;       // (max rows, D): the rows this rank routes, as one round sends them
  Tensor recv;       // (C, D): a round's incoming rows
  Tensor recv_grad;  // (C, D): their output gradients (backward)
  Tensor result;     // (C, D): the experts' results (or input gradients) on them
  // tp > 1 only: (gathered_rows(C, ep, tp), D), tp equal shards: each tp rank's sub-pieces of
  // a round (gathered over tp), then the partial results reduce-scattered over tp.
  Tensor gathered;
};

// What one call did.
struct DispatchStats {
  int rounds = 0;              // exchanges of rows (0 when no member routed any)
  int extra_rounds = 0;        // rounds past the first: the capacity was exceeded
  std::int64_t rows_sent = 0;  // rows this rank sent to other members (each way once)
  std::int64_t rows_received = 0;  // rows other members sent to this rank
  // Seconds the host waited for row exchanges (the communication compute did not hide; a
  // device communicator makes the stream wait instead, so it counts ~0 there).
  double wait_seconds = 0;
  DispatchStats& operator+=(const DispatchStats& o);
};

class ExpertDispatcher {
 public:
  ExpertDispatcher() = default;  // one member: every expert local, however many
  // `counts` carries the host integers every member plans with, `rows` the row tensors (the
  // same group; on a GPU its device communicator); E experts, a multiple of the members.
  ExpertDispatcher(Communicator& counts, Communicator& rows, int n_experts);
  // Under tensor parallelism: `tp` is this rank's tp group for tensors (the same device as
  // `rows`), whose members route the same rows and hold column shards of the same experts.
  ExpertDispatcher(Communicator& counts, Communicator& rows, Communicator& tp, int n_experts);

  // The rows of DispatchBuffers::gathered for a capacity of C rows over `members` ep ranks
  // and `tp` tp ranks (0 at tp = 1): tp shards of the most sub-piece rows one tp rank
  // receives in a round, floor((C + (ep - 1)(tp - 1)) / tp) (each source's piece splits into
  // parts of at most ceil(L / tp) rows).
  static std::int64_t gathered_rows(std::int64_t capacity, int members, int tp);

  const ExpertPlacement& placement() const { return placement_; }
  bool local() const { return rows_ == nullptr; }
  int members() const { return placement_.members; }
  int tp_size() const { return tp_ ? tp_->size() : 1; }

  // out (n, D) = each row of `in` (n, D, expert order, counts[e] rows of expert e, E counts)
  // through its expert. `alongside`, if given, runs once while the first rows travel (before
  // the experts in a group of one): work that touches none of these tensors.
  DispatchStats forward(Backend& be, ExpertCompute& experts, std::span<const std::int64_t> counts, Tensor in,
                        Tensor out, const DispatchBuffers& buffers, const std::function<void()>& alongside = {});
  // d_in (n, D) from d_out (n, D), rows as forward's; the owners add their experts' weight
  // gradients. `alongside` as forward's.
  DispatchStats backward(Backend& be, ExpertCompute& experts, std::span<const std::int64_t> counts, Tensor in,
                         Tensor d_out, Tensor d_in, const DispatchBuffers& buffers,
                         const std::function<void()>& alongside = {});
  // A split backward's weight pass: in a group of one the weight gradients backward() left
  // (ExpertCompute::backward_weight_all); dispatched rows' owners computed theirs in backward().
  void backward_weight(Backend& be, ExpertCompute& experts, std::span<const std::int64_t> counts) const;

 private:
  struct Plan;
  Plan plan(std::span<const std::int64_t> counts, const Tensor& in, const DispatchBuffers& buffers);
  // Copies this rank's pieces of round t out of `rows` into `send`; returns the element counts
  // per member.
  std::vector<std::int64_t> pack(Backend& be, const Plan& p, int round, Tensor rows, Tensor send) const;
  void unpack(Backend& be, const Plan& p, int round, Tensor rows, Tensor send) const;
  // Runs `run(source, expert, begin, end)` over the (source, expert) runs of round t's
  // received rows (begin, end: rows of the round's receive buffers).
  template <class Run>
  void for_each_run(const Plan& p, int round, Run run) const;
  // The row of the caller's tensors that holds position `position` of round t's receive
  // buffers, for a run this rank routed to itself.
  std::int64_t own_row(const Plan& p, int round, std::int64_t position) const;
  // tp > 1: the round's sub-pieces that arrived in this rank's shard of `gathered` (shards of
  // `shard` rows) are all-gathered over tp and placed at their stream positions in `into`.
  double gather_round(Backend& be, const Plan& p, int round, std::int64_t shard, Tensor gathered, Tensor into) const;
  // tp > 1: the partial results `from` of the round's rows are reduce-scattered over tp into
  // this rank's shard of `gathered` (the full sums of its sub-pieces' rows).
  double scatter_round(Backend& be, const Plan& p, int round, std::int64_t shard, Tensor gathered, Tensor from) const;
  // Zeros where this rank's rows for other members lie outside its sub-pieces (tp > 1): the
  // other tp ranks receive their results.
  void zero_others(Backend& be, const Plan& p, Tensor rows) const;
  // Where round t's incoming rows land: recv, or under tp this rank's shard (`shard` rows) of
  // the gathered buffer.
  Tensor landing(const Plan& p, std::int64_t shard, const DispatchBuffers& buffers) const;
  // The end of round t, after the experts ran on the received rows: their results (under tp
  // reduce-scattered first) go back to the members that sent them and land in `target`, the
  // caller's rows. Returns the seconds waited.
  double return_round(Backend& be, const Plan& p, int round, std::int64_t shard, const DispatchBuffers& buffers,
                      const std::vector<std::int64_t>& sent, const std::vector<std::int64_t>& received,
                      Tensor target) const;

  Communicator* counts_ = nullptr;
  Communicator* rows_ = nullptr;
  Communicator* tp_ = nullptr;  // null at tp = 1
  ExpertPlacement placement_;
  std::vector<std::int32_t> count_table_;  // (ep, E): the all-gathered counts, reused per call
};

}  // namespace ustrain
