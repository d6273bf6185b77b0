#include "parallel/ring_attention.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string>

namespace ustrain {
namespace {

constexpr int kKvTag = 1, kGradTag = 2;

// The first `rows` rows of a planned (rows_max, C) buffer as (B, n, C); `rows` = B n.
Tensor rows_as(const Tensor& buffer, std::int64_t batch, std::int64_t n) {
  return buffer.slice(0, batch * n).view(Shape{batch, n, buffer.shape.last()});
}

// The first B H n values of a planned flat buffer as (B, H, n).
Tensor stats_as(const Tensor& buffer, std::int64_t batch, std::int64_t heads, std::int64_t n) {
  return buffer.slice(0, batch * heads * n).view(Shape{batch, heads, n});
}

// The absolute position of local row `row` of `split`'s part of sequences of `seq_len`.
std::int64_t position_of(ContextSplit split, std::int64_t seq_len, std::int64_t row) {
  const std::array<SeqRange, 2> runs = split.runs(seq_len);
  return row < runs[0].count ? runs[0].begin + row : runs[1].begin + row - runs[0].count;
}

}  // namespace

HostDocuments HostDocuments::of(Backend& be, const AttentionMask& mask) {
  HostDocuments d;
  if (!mask.has_documents()) return d;
  USTRAIN_ASSERT(!mask.q_documents.empty() && !mask.k_documents.empty() && mask.q_documents.shape.rank() == 2 &&
                     mask.k_documents.shape.rank() == 2 && mask.k_documents.shape[0] == mask.q_documents.shape[0],
                 "ring attention: document ids need both q_documents and k_documents, (B, n) each");
  d.batch = mask.q_documents.shape[0];
  d.q.resize(static_cast<std::size_t>(mask.q_documents.numel()));
  d.k.resize(static_cast<std::size_t>(mask.k_documents.numel()));
  be.copy(Tensor(d.q.data(), mask.q_documents.shape, DType::i32), mask.q_documents);
  be.copy(Tensor(d.k.data(), mask.k_documents.shape, DType::i32), mask.k_documents);
  return d;
}

bool HostDocuments::share_a_document(SeqRange q_positions, SeqRange k_positions) const {
  if (batch == 0) return true;
  const auto span_of = [this](const std::vector<std::int32_t>& ids, std::int64_t b, SeqRange r) {
    const std::int64_t width = static_cast<std::int64_t>(ids.size()) / batch;
    USTRAIN_ASSERT(r.begin >= 0 && r.begin + r.count <= width,
                   "ring attention: document ids of " + std::to_string(width) + " positions do not cover positions " +
                       std::to_string(r.begin) + " .. " + std::to_string(r.begin + r.count - 1));
    const auto row = ids.begin() + b * width;
    return std::minmax_element(row + r.begin, row + r.begin + r.count);
  };
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto [q_low, q_high] = span_of(q, b, q_positions);
    const auto [k_low, k_high] = span_of(k, b, k_positions);
    if (*q_low <= *k_high && *k_low <= *q_high) return true;  // ids may match: not provably apart
  }
  return false;
}

namespace {

// The zig-zag blocks of a mask without window or documents: one block per step.
std::vector<RingBlock> zig_zag_blocks(int rank, int size, std::int64_t local_seq, const AttentionMask& mask) {
  using Kind = AttentionMask::Kind;
  const std::int64_t chunk = local_seq / 2, seq_len = local_seq * size;
  const SeqRange all{0, local_seq}, front{0, chunk}, back{chunk, chunk};
  std::vector<RingBlock> blocks;
  for (int t = 0; t < size; ++t) {
    const int source = (rank - t + size) % size;
    RingBlock b{source, all, all, mask};  // under any other kind every query may meet every key
    if (mask.kind == Kind::causal && source != rank) {  // zig-zag: one chunk of either side, unmasked
      b.mask.kind = Kind::none;
      if (source < rank) b.k = front;
      else b.q = back;
    }
    b.mask.q_first = mask.q_first + position_of({size, rank}, seq_len, b.q.begin);
    b.mask.k_first = mask.k_first + position_of({size, source}, seq_len, b.k.begin);
    blocks.push_back(b);
  }
  return blocks;
}

// A query chunk against a key chunk: local rows and absolute positions of either.
struct ChunkPair {
  int source;
  SeqRange q_rows, q_positions, k_rows, k_positions;
};

// The block of one chunk pair under the sub-layer's mask; nothing where it allows no pair.
std::optional<RingBlock> chunk_block(const ChunkPair& p, const AttentionMask& mask, const HostDocuments& documents) {
  RingBlock b{p.source, p.q_rows, p.k_rows, mask};
  b.mask.q_first = mask.q_first + p.q_positions.begin;
  b.mask.k_first = mask.k_first + p.k_positions.begin;
  if (mask.kind == AttentionMask::Kind::causal && p.k_positions.begin != p.q_positions.begin) {
    if (p.k_positions.begin > p.q_positions.begin) return std::nullopt;  // every key after every query
    b.mask.kind = AttentionMask::Kind::none;                           // every key before every query
  }
  const std::int64_t nearest = b.mask.q_first - (b.mask.k_first + p.k_rows.count - 1);  // the least i - j
  if (mask.has_window() && nearest >= mask.window) return std::nullopt;
  if (!documents.share_a_document({b.mask.q_first, p.q_rows.count}, {b.mask.k_first, p.k_rows.count}))
    return std::nullopt;
  return b;
}

// Under a window or documents: each step's chunk pairs that the mask allows a pair in.
std::vector<RingBlock> chunk_blocks(int rank, int size, std::int64_t local_seq, const AttentionMask& mask,
                                    const HostDocuments& documents) {
  const std::int64_t chunk = local_seq / 2, seq_len = local_seq * size;
  const std::array<SeqRange, 2> rows{SeqRange{0, chunk}, SeqRange{chunk, chunk}};
  std::vector<RingBlock> blocks;
  for (int t = 0; t < size; ++t) {
    const int source = (rank - t + size) % size;
    const std::array<SeqRange, 2> q_runs = ContextSplit{size, rank}.runs(seq_len);
    const std::array<SeqRange, 2> k_runs = ContextSplit{size, source}.runs(seq_len);
    for (std::size_t qc = 0; qc < 2; ++qc)
      for (std::size_t kc = 0; kc < 2; ++kc)
        if (auto b = chunk_block({source, rows[qc], q_runs[qc], rows[kc], k_runs[kc]}, mask, documents))
          blocks.push_back(*b);
  }
  return blocks;
}

}  // namespace

std::vector<RingBlock> ring_schedule(int rank, int size, std::int64_t local_seq, const AttentionMask& mask,
                                     const HostDocuments& documents) {
  if (size == 1) {  // the whole sequence against its own keys; the kernel skips what the mask forbids
    RingBlock self{0, {0, local_seq}, {0, local_seq}, mask};
    return {self};
  }
  if (!mask.has_window() && !mask.has_documents()) return zig_zag_blocks(rank, size, local_seq, mask);
  return chunk_blocks(rank, size, local_seq, mask, documents);
}

std::int64_t score_entries(const std::vector<RingBlock>& schedule) {
  std::int64_t n = 0;
  for (const RingBlock& b : schedule)
    n += b.mask.kind == AttentionMask::Kind::none ? b.q.count * b.k.count : b.q.count * (b.q.count + 1) / 2;
  return n;
}

void RingAttention::sum(Tensor t) {
  if (cp_ == nullptr || cp_->size() == 1) return;
  cp_->all_reduce(t).join_compute();
}

std::vector<Work> RingAttention::pass_on(Tensor send, Tensor recv, int tag) {
  const int n = size(), r = rank();
  const PeerTransfer transfers[] = {{PeerTransfer::Kind::send, send, (r + 1) % n, tag},
                                    {PeerTransfer::Kind::recv, recv, (r + n - 1) % n, tag}};
  return cp_->exchange(transfers);
}

void RingAttention::wait(std::vector<Work>& works, double& seconds) {
  const auto start = std::chrono::steady_clock::now();
  for (Work& w : works) w.join_compute();
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// In schedule order within a step. Bucketed once: a ring of many ranks has many blocks and steps.
std::vector<std::vector<const RingBlock*>> RingAttention::blocks_by_step(const std::vector<RingBlock>& blocks) const {
  const int n = size(), r = rank();
  std::vector<std::vector<const RingBlock*>> steps(static_cast<std::size_t>(n));
  for (const RingBlock& b : blocks) steps[static_cast<std::size_t>((r - b.source + n) % n)].push_back(&b);
  return steps;
}

void RingAttention::forward(Backend& be, Tensor out, Tensor lse, Tensor qkv, const AttentionMask& mask, int n_heads,
                            int n_kv_heads, const RingBuffers& buf) {
  const std::int64_t B = qkv.shape[0], S = qkv.shape[1];
  if (size() == 1) {  // the whole sequence is one block of its own keys: nothing packed or merged
    const RingBlock b = ring_schedule(0, 1, S, mask).front();
    be.attention_block_forward(out, lse, qkv, b.q, Tensor(), b.k, b.mask, n_heads, n_kv_heads);
    return;
  }
  const std::vector<RingBlock> blocks = ring_schedule(rank(), size(), S, mask, HostDocuments::of(be, mask));
  // The running result: out itself in fp32, else fp32 scratch converted at the end. This
  // rank's own block, when it covers every query, starts it; else it starts empty.
  const Tensor acc = out.dtype == DType::f32 ? out : rows_as(buf.acc, B, S);
  const bool own_block_starts = !blocks.empty() && blocks.front().source == rank() && blocks.front().q.count == S;
  if (!own_block_starts) {
    be.fill(acc, 0.0f);
    be.fill(lse, -std::numeric_limits<float>::infinity());
  }
  const std::array<Tensor, 2> kv{rows_as(buf.kv[0], B, S), rows_as(buf.kv[1], B, S)};
  be.attention_kv_pack(kv[0], qkv, n_heads, n_kv_heads);
  const auto steps = blocks_by_step(blocks);
  const int n = size();
  for (int t = 0; t < n; ++t) {
    const Tensor& here = kv[t % 2];
    std::vector<Work> arriving;
    if (t + 1 < n) arriving = pass_on(here, kv[(t + 1) % 2], kKvTag);
    for (const RingBlock* at : steps[static_cast<std::size_t>(t)]) {
      const RingBlock& b = *at;
      if (&b == &blocks.front() && own_block_starts) {
        be.attention_block_forward(acc, lse, qkv, b.q, here, b.k, b.mask, n_heads, n_kv_heads);
        continue;
      }
      const Tensor o = rows_as(buf.block_out, B, b.q.count), l = stats_as(buf.block_lse, B, n_heads, b.q.count);
      be.attention_block_forward(o, l, qkv, b.q, here, b.k, b.mask, n_heads, n_kv_heads);
      be.attention_merge(acc, lse, o, l, b.q);
    }
    wait(arriving, block_wait_);
  }
  if (acc.data != out.data) be.convert(out, acc);
}

void RingAttention::backward(Backend& be, Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                             const AttentionMask& mask, int n_heads, int n_kv_heads, const RingBuffers& buf) {
  const std::int64_t B = qkv.shape[0], S = qkv.shape[1];
  if (size() == 1) {  // one block: its gradient is dqkv's, written in place
    const RingBlock b = ring_schedule(0, 1, S, mask).front();
    be.attention_block_backward(dqkv, Tensor(), dout, qkv, b.q, Tensor(), b.k, out, lse, b.mask, n_heads, n_kv_heads);
    return;
  }
  const std::vector<RingBlock> blocks = ring_schedule(rank(), size(), S, mask, HostDocuments::of(be, mask));
  const std::array<Tensor, 2> kv{rows_as(buf.kv[0], B, S), rows_as(buf.kv[1], B, S)};
  const std::array<Tensor, 2> dkv{rows_as(buf.dkv[0], B, S), rows_as(buf.dkv[1], B, S)};
  const Tensor dq = rows_as(buf.dq, B, S);
  be.attention_kv_pack(kv[0], qkv, n_heads, n_kv_heads);
  be.fill(dq, 0.0f);
  be.fill(dkv[0], 0.0f);
  const auto steps = blocks_by_step(blocks);
  const int n = size();
  for (int t = 0; t < n; ++t) {
    const Tensor &here = kv[t % 2], &sum = dkv[t % 2];
    std::vector<Work> arriving;
    if (t + 1 < n) arriving = pass_on(here, kv[(t + 1) % 2], kKvTag);
    for (const RingBlock* b : steps[static_cast<std::size_t>(t)])
      be.attention_block_backward(dq, sum, dout, qkv, b->q, here, b->k, out, lse, b->mask, n_heads, n_kv_heads);
    wait(arriving, block_wait_);
    // The sum goes on to the next rank, which adds its share; after the last step each rank
    // receives its own block's complete sum.
    std::vector<Work> sums = pass_on(sum, dkv[(t + 1) % 2], kGradTag);
    wait(sums, sum_wait_);
  }
  be.attention_grad_pack(dqkv, dq, dkv[n % 2]);
}

}  // namespace ustrain
