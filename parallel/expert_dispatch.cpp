#include "parallel/expert_dispatch.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "kernels/error.h"

namespace ustrain {

namespace {

// All elements of a planned buffer as one flat tensor (the communicators' counts are elements).
Tensor flat(const Tensor& t) { return Tensor(t.data, Shape{t.numel()}, t.dtype, t.device); }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Orders an exchange before the compute that follows; the seconds the host was held (on a
// device communicator join_compute returns at once: the stream waits, not the host).
double joined(Work work) {
  const auto start = std::chrono::steady_clock::now();
  work.join_compute();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

DispatchStats& DispatchStats::operator+=(const DispatchStats& o) {
  rounds += o.rounds;
  extra_rounds += o.extra_rounds;
  rows_sent += o.rows_sent;
  rows_received += o.rows_received;
  wait_seconds += o.wait_seconds;
  return *this;
}

// Who sends what to whom, from every member's counts. Positions are rows of a destination's
// incoming stream (sources in member order, each source's rows in expert order).
struct ExpertDispatcher::Plan {
  int members = 1, n_experts = 1, me = 0;
  int tp = 1, tp_rank = 0;                 // the tp group that shares the traffic
  std::int64_t width = 0;                  // D
  std::vector<std::int64_t> table;         // (ep, E) rows of source s for expert e
  std::vector<std::int64_t> stream_begin;  // (ep, ep) [s][d]: where source s's rows start in d's stream
  std::vector<std::int64_t> to;            // (ep, ep) [s][d]: rows source s routes to member d
  std::vector<std::int64_t> own_offset;    // (ep) where this rank's rows for member d start in its input
  int rounds = 0;
  std::int64_t capacity = 0;

  std::int64_t at(int s, int e) const { return table[static_cast<std::size_t>(s * n_experts + e)]; }
  std::int64_t begin(int s, int d) const { return stream_begin[static_cast<std::size_t>(s * members + d)]; }
  std::int64_t rows(int s, int d) const { return to[static_cast<std::size_t>(s * members + d)]; }
  // Round t's part of source s's rows for member d, as positions [lo, hi) of d's stream
  // (empty when hi <= lo).
  std::pair<std::int64_t, std::int64_t> piece(int s, int d, int t) const {
    const std::int64_t b = begin(s, d);
    return {std::max(b, t * capacity), std::min(b + rows(s, d), (t + 1) * capacity)};
  }
  // Whether the pieces between members split over the tp ranks.
  bool split() const { return tp > 1; }
  // The part of round t's piece from s to d that tp rank u sends and receives: its u-th of tp
  // contiguous parts. At tp = 1, and for a rank's own piece (never sent), the whole piece.
  std::pair<std::int64_t, std::int64_t> sub(int s, int d, int t, int u) const {
    const auto [lo, hi] = piece(s, d, t);
    if (!split() || s == d || hi <= lo) return {lo, hi};
    const std::int64_t len = hi - lo;
    return {lo + len * u / tp, lo + len * (u + 1) / tp};
  }
  std::pair<std::int64_t, std::int64_t> mine(int s, int d, int t) const { return sub(s, d, t, tp_rank); }
  // Rows tp rank u of member `me` receives from other members in round t.
  std::int64_t received_by(int t, int u) const {
    std::int64_t n = 0;
    for (int s = 0; s < members; ++s) {
      if (s == me) continue;
      const auto [lo, hi] = sub(s, me, t, u);
      n += std::max<std::int64_t>(0, hi - lo);
    }
    return n;
  }
  // The rows of each tp rank's shard of the gathered buffer in round t: the most any receives.
  std::int64_t shard(int t) const {
    std::int64_t most = 0;
    for (int u = 0; u < tp; ++u) most = std::max(most, received_by(t, u));
    return most;
  }
};

ExpertDispatcher::ExpertDispatcher(Communicator& counts, Communicator& rows, Communicator& tp, int n_experts)
    : ExpertDispatcher(counts, rows, n_experts) {
  if (local() || tp.size() == 1) return;  // nothing travels, or nothing to share
  USTRAIN_ASSERT(tp.device() == rows.device(), "the dispatcher's tp group carries tensors like its ep group");
  tp_ = &tp;
}

std::int64_t ExpertDispatcher::gathered_rows(std::int64_t capacity, int members, int tp) {
  if (tp <= 1) return 0;
  return tp * ((capacity + static_cast<std::int64_t>(members - 1) * (tp - 1)) / tp);
}

ExpertDispatcher::ExpertDispatcher(Communicator& counts, Communicator& rows, int n_experts)
    : counts_(&counts), rows_(&rows), placement_{n_experts, rows.size(), rows.rank()} {
  USTRAIN_ASSERT(counts.size() == rows.size() && counts.rank() == rows.rank(),
                 "the dispatcher's two communicators are one group");
  USTRAIN_ASSERT(n_experts % rows.size() == 0,
                 fmt::format("{} experts do not split over {} ep ranks", n_experts, rows.size()));
  if (rows.size() == 1) {  // a group of one: every expert is local
    rows_ = counts_ = nullptr;
    return;
  }
  count_table_.assign(static_cast<std::size_t>(rows.size() * n_experts), 0);
}

ExpertDispatcher::Plan ExpertDispatcher::plan(std::span<const std::int64_t> counts, const Tensor& in,
                                              const DispatchBuffers& buffers) {
  const ExpertPlacement& pl = placement_;
  Plan p;
  p.members = pl.members, p.n_experts = pl.n_experts, p.me = pl.member;
  p.width = in.shape.last();
  p.capacity = buffers.recv.shape[0];
  if (tp_) p.tp = tp_->size(), p.tp_rank = tp_->rank();
  USTRAIN_ASSERT(p.capacity >= 1 && buffers.recv_grad.shape[0] == p.capacity && buffers.result.shape[0] == p.capacity,
                 "dispatch buffers of at least one row, all of the capacity's rows");
  std::vector<const Tensor*> planned{&buffers.send, &buffers.recv, &buffers.recv_grad, &buffers.result};
  if (p.split()) {
    planned.push_back(&buffers.gathered);
    USTRAIN_ASSERT(buffers.gathered.shape.rank() == 2 &&
                       buffers.gathered.shape[0] == gathered_rows(p.capacity, p.members, p.tp),
                   "a gathered dispatch buffer of gathered_rows(capacity, ep, tp) rows under tp > 1");
  }
  for (const Tensor* t : planned)
    USTRAIN_ASSERT(t->shape.rank() == 2 && t->shape.last() == p.width && t->dtype == in.dtype,
                   "dispatch buffers of the rows' width and dtype");
  USTRAIN_ASSERT(buffers.send.shape[0] >= in.shape[0], "a send buffer of the input's rows");
  // This rank's counts in every member's row: the gather overwrites the others' with theirs,
  // while a counting group (a planner's recorded step, parallel/comm/counting_communicator.h) leaves
  // them, so that step plans as if every member routed like this one.
  const auto e_count = static_cast<std::size_t>(pl.n_experts);
  for (std::size_t e = 0; e < e_count; ++e)
    USTRAIN_ASSERT(counts[e] >= 0 && counts[e] <= INT32_MAX, "expert row counts in [0, 2^31)");
  for (std::size_t m = 0; m < static_cast<std::size_t>(pl.members); ++m)
    for (std::size_t e = 0; e < e_count; ++e) count_table_[m * e_count + e] = static_cast<std::int32_t>(counts[e]);
  const Tensor table(count_table_.data(), Shape{static_cast<std::int64_t>(count_table_.size())}, DType::i32);
  counts_->all_gather(table, table.slice(pl.member * pl.n_experts, (pl.member + 1) * pl.n_experts)).wait();
  p.table.assign(count_table_.begin(), count_table_.end());

  const auto m = static_cast<std::size_t>(p.members);
  p.to.assign(m * m, 0);
  p.stream_begin.assign(m * m, 0);
  for (int s = 0; s < p.members; ++s)
    for (int e = 0; e < p.n_experts; ++e) p.to[static_cast<std::size_t>(s * p.members + pl.owner(e))] += p.at(s, e);
  std::int64_t most = 0;  // rows some member receives
  for (int d = 0; d < p.members; ++d) {
    std::int64_t at = 0;
    for (int s = 0; s < p.members; ++s) {
      p.stream_begin[static_cast<std::size_t>(s * p.members + d)] = at;
      at += p.rows(s, d);
    }
    most = std::max(most, at);
  }
  p.rounds = static_cast<int>(ceil_div(most, p.capacity));
  p.own_offset.assign(m, 0);
  for (int d = 1; d < p.members; ++d) {
    const auto i = static_cast<std::size_t>(d);
    p.own_offset[i] = p.own_offset[i - 1] + p.rows(p.me, d - 1);
  }
  return p;
}

std::vector<std::int64_t> ExpertDispatcher::pack(Backend& be, const Plan& p, int round, Tensor rows,
                                                 Tensor send) const {
  std::vector<std::int64_t> elements(static_cast<std::size_t>(p.members), 0);
  std::int64_t at = 0;
  for (int d = 0; d < p.members; ++d) {
    if (p.split() && d == p.me) continue;  // own rows stay: every tp rank computes them in place
    const auto [lo, hi] = p.mine(p.me, d, round);
    if (hi <= lo) continue;
    const std::int64_t from = p.own_offset[static_cast<std::size_t>(d)] + lo - p.begin(p.me, d);
    be.copy(send.slice(at, at + hi - lo), rows.slice(from, from + hi - lo));
    at += hi - lo;
    elements[static_cast<std::size_t>(d)] = (hi - lo) * p.width;
  }
  return elements;
}

void ExpertDispatcher::unpack(Backend& be, const Plan& p, int round, Tensor rows, Tensor send) const {
  std::int64_t at = 0;
  for (int d = 0; d < p.members; ++d) {
    if (p.split() && d == p.me) continue;
    const auto [lo, hi] = p.mine(p.me, d, round);
    if (hi <= lo) continue;
    const std::int64_t to = p.own_offset[static_cast<std::size_t>(d)] + lo - p.begin(p.me, d);
    if (d != p.me) be.copy(rows.slice(to, to + hi - lo), send.slice(at, at + hi - lo));  // own rows: done in place
    at += hi - lo;
  }
}

template <class Run>
void ExpertDispatcher::for_each_run(const Plan& p, int round, Run run) const {
  const std::int64_t window = round * p.capacity;
  const int first = placement_.first(), last = first + placement_.per_member();
  for (int s = 0; s < p.members; ++s) {
    std::int64_t at = p.begin(s, p.me);  // stream position of expert e's rows from source s
    for (int e = first; e < last; ++e) {
      const std::int64_t lo = std::max(at, window), hi = std::min(at + p.at(s, e), window + p.capacity);
      if (hi > lo) run(s, e, lo - window, hi - window);
      at += p.at(s, e);
    }
  }
}

double ExpertDispatcher::gather_round(Backend& be, const Plan& p, int round, std::int64_t shard, Tensor gathered,
                                      Tensor into) const {
  const Tensor all = gathered.slice(0, p.tp * shard);
  const double waited = joined(tp_->all_gather(flat(all), flat(all.slice(p.tp_rank * shard, (p.tp_rank + 1) * shard))));
  const std::int64_t window = round * p.capacity;
  for (int u = 0; u < p.tp; ++u) {  // tp rank u's sub-pieces, in source order
    std::int64_t at = u * shard;
    for (int s = 0; s < p.members; ++s) {
      if (s == p.me) continue;
      const auto [lo, hi] = p.sub(s, p.me, round, u);
      if (hi <= lo) continue;
      be.copy(into.slice(lo - window, hi - window), gathered.slice(at, at + hi - lo));
      at += hi - lo;
    }
  }
  return waited;
}

double ExpertDispatcher::scatter_round(Backend& be, const Plan& p, int round, std::int64_t shard, Tensor gathered,
                                       Tensor from) const {
  const std::int64_t window = round * p.capacity;
  for (int u = 0; u < p.tp; ++u) {  // the layout gather_round read
    std::int64_t at = u * shard;
    for (int s = 0; s < p.members; ++s) {
      if (s == p.me) continue;
      const auto [lo, hi] = p.sub(s, p.me, round, u);
      if (hi <= lo) continue;
      be.copy(gathered.slice(at, at + hi - lo), from.slice(lo - window, hi - window));
      at += hi - lo;
    }
  }
  const Tensor all = gathered.slice(0, p.tp * shard);
  return joined(tp_->reduce_scatter(flat(all.slice(p.tp_rank * shard, (p.tp_rank + 1) * shard)), flat(all)));
}

void ExpertDispatcher::zero_others(Backend& be, const Plan& p, Tensor rows) const {
  if (!p.split()) return;
  for (int d = 0; d < p.members; ++d) {
    const std::int64_t begin = p.own_offset[static_cast<std::size_t>(d)], n = p.rows(p.me, d);
    if (d != p.me && n > 0) be.fill(rows.slice(begin, begin + n), 0.0f);
  }
}

Tensor ExpertDispatcher::landing(const Plan& p, std::int64_t shard, const DispatchBuffers& buf) const {
  return p.split() ? buf.gathered.slice(p.tp_rank * shard, (p.tp_rank + 1) * shard) : buf.recv;
}

double ExpertDispatcher::return_round(Backend& be, const Plan& p, int round, std::int64_t shard,
                                      const DispatchBuffers& buf, const std::vector<std::int64_t>& sent,
                                      const std::vector<std::int64_t>& received, Tensor target) const {
  double waited = 0;
  if (shard > 0) waited += scatter_round(be, p, round, shard, buf.gathered, buf.result);
  const Tensor results = p.split() ? landing(p, shard, buf) : buf.result;
  waited += joined(rows_->all_to_all_v(flat(buf.send), sent, flat(results), received));
  unpack(be, p, round, target, buf.send);
  return waited;
}

std::int64_t ExpertDispatcher::own_row(const Plan& p, int round, std::int64_t position) const {
  return p.own_offset[static_cast<std::size_t>(p.me)] + round * p.capacity + position - p.begin(p.me, p.me);
}

namespace {

// Element counts of what member `me` receives in round t (from each source), from the plan.
template <class PlanT>
std::vector<std::int64_t> incoming(const PlanT& p, int round, DispatchStats& stats) {
  std::vector<std::int64_t> elements(static_cast<std::size_t>(p.members), 0);
  for (int s = 0; s < p.members; ++s) {
    if (p.split() && s == p.me) continue;
    const auto [lo, hi] = p.mine(s, p.me, round);
    if (hi <= lo) continue;
    elements[static_cast<std::size_t>(s)] = (hi - lo) * p.width;
    if (s != p.me) stats.rows_received += hi - lo;
  }
  return elements;
}

void count_sent(const std::vector<std::int64_t>& elements, int me, std::int64_t width, DispatchStats& stats) {
  for (std::size_t d = 0; d < elements.size(); ++d)
    if (static_cast<int>(d) != me) stats.rows_sent += elements[d] / width;
}

DispatchStats finished(DispatchStats stats, int rounds, const std::function<void()>& alongside) {
  if (rounds == 0 && alongside) alongside();  // no member routed a row
  stats.rounds = rounds;
  stats.extra_rounds = std::max(0, rounds - 1);
  return stats;
}

void check_rows(std::span<const std::int64_t> counts, int n_experts, const Tensor& in,
                std::initializer_list<Tensor> others) {
  USTRAIN_ASSERT(counts.size() == static_cast<std::size_t>(n_experts), "one row count per expert");
  std::int64_t total = 0;
  for (std::int64_t c : counts) total += c;
  USTRAIN_ASSERT(in.shape.rank() == 2 && in.shape[0] == total,
                 fmt::format("dispatch: {} rows counted, the input holds {}", total, in.shape[0]));
  for (const Tensor& t : others) USTRAIN_ASSERT(t.shape == in.shape, "dispatch: rows of the input's shape");
}

}  // namespace

void ExpertDispatcher::backward_weight(Backend& be, ExpertCompute& experts, std::span<const std::int64_t> counts) const {
  if (local()) experts.backward_weight_all(be, counts);
}

DispatchStats ExpertDispatcher::forward(Backend& be, ExpertCompute& experts, std::span<const std::int64_t> counts,
                                        Tensor in, Tensor out, const DispatchBuffers& buf,
                                        const std::function<void()>& alongside) {
  check_rows(counts, local() ? static_cast<int>(counts.size()) : placement_.n_experts, in, {out});
  DispatchStats stats;
  if (local()) {
    if (alongside) alongside();
    experts.forward_all(be, counts, out, in);
    return stats;
  }
  const Plan p = plan(counts, in, buf);
  zero_others(be, p, out);
  for (int t = 0; t < p.rounds; ++t) {
    const std::vector<std::int64_t> sent = pack(be, p, t, in, buf.send);
    const std::vector<std::int64_t> received = incoming(p, t, stats);
    count_sent(sent, p.me, p.width, stats);
    const std::int64_t shard = p.split() ? p.shard(t) : 0;
    Work rows = rows_->all_to_all_v(flat(landing(p, shard, buf)), received, flat(buf.send), sent);
    // While the rows travel: the caller's work, then this rank's own rows on its own experts.
    if (t == 0 && alongside) alongside();
    for_each_run(p, t, [&](int s, int e, std::int64_t b, std::int64_t end) {
      if (s != p.me) return;
      const std::int64_t r = own_row(p, t, b);
      experts.forward(be, e, out.slice(r, r + end - b), in.slice(r, r + end - b));
    });
    stats.wait_seconds += joined(rows);
    if (shard > 0) stats.wait_seconds += gather_round(be, p, t, shard, buf.gathered, buf.recv);
    for_each_run(p, t, [&](int s, int e, std::int64_t b, std::int64_t end) {
      if (s != p.me) experts.forward(be, e, buf.result.slice(b, end), buf.recv.slice(b, end));
    });
    stats.wait_seconds += return_round(be, p, t, shard, buf, sent, received, out);
  }
  return finished(stats, p.rounds, alongside);
}

DispatchStats ExpertDispatcher::backward(Backend& be, ExpertCompute& experts, std::span<const std::int64_t> counts,
                                         Tensor in, Tensor d_out, Tensor d_in, const DispatchBuffers& buf,
                                         const std::function<void()>& alongside) {
  check_rows(counts, local() ? static_cast<int>(counts.size()) : placement_.n_experts, in, {d_out, d_in});
  DispatchStats stats;
  if (local()) {
    if (alongside) alongside();
    experts.backward_all(be, counts, d_in, d_out, in);
    return stats;
  }
  const Plan p = plan(counts, in, buf);
  zero_others(be, p, d_in);
  for (int t = 0; t < p.rounds; ++t) {
    const std::vector<std::int64_t> received = incoming(p, t, stats);
    std::vector<std::int64_t> sent = pack(be, p, t, in, buf.send);
    count_sent(sent, p.me, p.width, stats);
    const std::int64_t shard = p.split() ? p.shard(t) : 0;  // as forward's
    const Tensor landed = landing(p, shard, buf);
    Work rows = rows_->all_to_all_v(flat(landed), received, flat(buf.send), sent);
    if (t == 0 && alongside) alongside();  // while the rows travel
    stats.wait_seconds += joined(rows);
    if (shard > 0) stats.wait_seconds += gather_round(be, p, t, shard, buf.gathered, buf.recv);
    sent = pack(be, p, t, d_out, buf.send);
    Work grads = rows_->all_to_all_v(flat(p.split() ? landed : buf.recv_grad), received, flat(buf.send), sent);
    for_each_run(p, t, [&](int s, int e, std::int64_t b, std::int64_t end) {  // own rows, while the gradients travel
      if (s != p.me) return;
      const std::int64_t r = own_row(p, t, b);
      experts.backward(be, e, d_in.slice(r, r + end - b), d_out.slice(r, r + end - b), in.slice(r, r + end - b));
    });
    stats.wait_seconds += joined(grads);
    if (shard > 0) stats.wait_seconds += gather_round(be, p, t, shard, buf.gathered, buf.recv_grad);
    for_each_run(p, t, [&](int s, int e, std::int64_t b, std::int64_t end) {
      if (s != p.me)
        experts.backward(be, e, buf.result.slice(b, end), buf.recv_grad.slice(b, end), buf.recv.slice(b, end));
    });
    stats.wait_seconds += return_round(be, p, t, shard, buf, sent, received, d_in);
  }
  return finished(stats, p.rounds, alongside);
}

}  // namespace ustrain
