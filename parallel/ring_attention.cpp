#include "parallel/ring_attention.h"

#include <chrono>

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

std::vector<RingBlock> ring_schedule(int rank, int size, std::int64_t local_seq, const AttentionMask& mask) {
  USTRAIN_ASSERT(size == 1 || !mask.has_documents(),
                 "ring attention: document ids under context parallelism are not implemented");
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

void RingAttention::forward(Backend& be, Tensor out, Tensor lse, Tensor qkv, const AttentionMask& mask, int n_heads,
                            int n_kv_heads, const RingBuffers& buf) {
  const std::int64_t B = qkv.shape[0], S = qkv.shape[1];
  const std::vector<RingBlock> blocks = ring_schedule(rank(), size(), S, mask);
  if (size() == 1) {  // the whole sequence is one block of its own keys: nothing packed or merged
    const RingBlock& b = blocks.front();
    be.attention_block_forward(out, lse, qkv, b.q, Tensor(), b.k, b.mask, n_heads, n_kv_heads);
    return;
  }
  // The running result: out itself in fp32, else fp32 scratch converted at the end.
  const Tensor acc = out.dtype == DType::f32 ? out : rows_as(buf.acc, B, S);
  const std::array<Tensor, 2> kv{rows_as(buf.kv[0], B, S), rows_as(buf.kv[1], B, S)};
  be.attention_kv_pack(kv[0], qkv, n_heads, n_kv_heads);
  for (std::size_t t = 0; t < blocks.size(); ++t) {
    const Tensor& here = kv[t % 2];
    std::vector<Work> arriving;
    if (t + 1 < blocks.size()) arriving = pass_on(here, kv[(t + 1) % 2], kKvTag);
    const RingBlock& b = blocks[t];
    if (t == 0) {  // this rank's own block covers every query: it starts the running result
      be.attention_block_forward(acc, lse, qkv, b.q, here, b.k, b.mask, n_heads, n_kv_heads);
    } else {
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
  const std::vector<RingBlock> blocks = ring_schedule(rank(), size(), S, mask);
  if (size() == 1) {  // one block: its gradient is dqkv's, written in place
    const RingBlock& b = blocks.front();
    be.attention_block_backward(dqkv, Tensor(), dout, qkv, b.q, Tensor(), b.k, out, lse, b.mask, n_heads, n_kv_heads);
    return;
  }
  const std::array<Tensor, 2> kv{rows_as(buf.kv[0], B, S), rows_as(buf.kv[1], B, S)};
  const std::array<Tensor, 2> dkv{rows_as(buf.dkv[0], B, S), rows_as(buf.dkv[1], B, S)};
  const Tensor dq = rows_as(buf.dq, B, S);
  be.attention_kv_pack(kv[0], qkv, n_heads, n_kv_heads);
  be.fill(dq, 0.0f);
  be.fill(dkv[0], 0.0f);
  for (std::size_t t = 0; t < blocks.size(); ++t) {
    const Tensor &here = kv[t % 2], &sum = dkv[t % 2];
    std::vector<Work> arriving;
    if (t + 1 < blocks.size()) arriving = pass_on(here, kv[(t + 1) % 2], kKvTag);
    const RingBlock& b = blocks[t];
    be.attention_block_backward(dq, sum, dout, qkv, b.q, here, b.k, out, lse, b.mask, n_heads, n_kv_heads);
    wait(arriving, block_wait_);
    // The sum goes on to the next rank, which adds its share; after the last step each rank
    // receives its own block's complete sum.
    std::vector<Work> sums = pass_on(sum, dkv[(t + 1) % 2], kGradTag);
    wait(sums, sum_wait_);
  }
  be.attention_grad_pack(dqkv, dq, dkv[blocks.size() % 2]);
}

}  // namespace ustrain
