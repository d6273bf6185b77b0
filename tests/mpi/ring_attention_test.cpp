// Ring attention over MPI at 2 and 4 ranks against the whole-sequence attention on one rank,
// forward and backward, with the bytes the ring sends against its formula: (cp - 1) key/value
// blocks forward, (cp - 1) blocks and cp fp32 gradient sums backward.
#include <gtest/gtest.h>

#include "parallel/ring_attention.h"
#include "tests/mpi/mpi_test_world.h"
#include "tests/unit/kernels_reference.h"

namespace ustrain {
namespace {

using mpi_test::world;

// Rows of (B, S, C) `full` at this rank's positions, as (B, S / cp, C).
std::vector<float> local_rows(const std::vector<float>& full, std::int64_t batch, std::int64_t seq, std::int64_t columns,
                              ContextSplit split) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < batch; ++b)
    for (const SeqRange& r : split.runs(seq)) {
      const auto at = full.begin() + (b * seq + r.begin) * columns;
      out.insert(out.end(), at, at + r.count * columns);
    }
  return out;
}

std::vector<float> zeros(std::int64_t n) { return std::vector<float>(static_cast<std::size_t>(n), 0.0f); }

// Document ids of packed windows, by absolute position: documents of 1 to 12 tokens.
std::vector<std::int32_t> packed_documents(std::int64_t batch, std::int64_t seq) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seq));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t p = 0, doc = 0, left = 0; p < seq; ++p, --left) {
      if (left == 0) left = 1 + (p * 5 + b * 3 + doc++) % 12;
      ids[static_cast<std::size_t>(b * seq + p)] = static_cast<std::int32_t>(doc);
    }
  return ids;
}

TEST(RingAttention, EqualsAttentionOverTheWholeSequence) {
  auto comm = world().everyone();
  const int cp = comm->size();
  CpuBackend cpu(1);
  struct Case {
    std::int64_t batch, seq, heads, kv_heads, head_dim, window;
    bool documents;
  };
  // The plain causal mask, then a window, documents, and both (every rank holds the whole
  // window's document ids).
  for (const Case& c : {Case{2, 16 * cp, 4, 2, 8, 0, false}, Case{1, 64 * cp, 4, 1, 16, 0, false},
                        Case{1, 8 * cp, 2, 2, 4, 0, false}, Case{2, 16 * cp, 4, 2, 8, 9, false},
                        Case{2, 16 * cp, 4, 2, 8, 0, true}, Case{1, 64 * cp, 4, 1, 16, 20, true}}) {
    SCOPED_TRACE("S=" + std::to_string(c.seq) + " H=" + std::to_string(c.heads) + " Hkv=" + std::to_string(c.kv_heads) +
                 " W=" + std::to_string(c.window) + (c.documents ? " documents" : ""));
    std::vector<std::int32_t> ids = packed_documents(c.batch, c.seq);
    AttentionMask mask = AttentionMask::causal();
    mask.window = c.window;
    if (c.documents) mask.q_documents = mask.k_documents = test::i32(ids, Shape{c.batch, c.seq});
    const std::int64_t W = (c.heads + 2 * c.kv_heads) * c.head_dim, OW = c.heads * c.head_dim;
    const std::int64_t KW = 2 * c.kv_heads * c.head_dim, S = c.seq / cp, n = c.batch * S;
    auto qkv = test::random_floats(static_cast<std::size_t>(c.batch * c.seq * W), 61, -2.0f, 2.0f);
    auto dout = test::random_floats(static_cast<std::size_t>(c.batch * c.seq * OW), 62);
    auto out = zeros(c.batch * c.seq * OW), lse = zeros(c.batch * c.heads * c.seq), dqkv = zeros(c.batch * c.seq * W);
    const Shape full{c.batch, c.seq, W}, full_out{c.batch, c.seq, OW}, full_lse{c.batch, c.heads, c.seq};
    const SeqRange all{0, c.seq};
    cpu.attention_block_forward(test::f32(out, full_out), test::f32(lse, full_lse), test::f32(qkv, full), all, Tensor(),
                                all, mask, int(c.heads), int(c.kv_heads));
    cpu.attention_block_backward(test::f32(dqkv, full), Tensor(), test::f32(dout, full_out), test::f32(qkv, full), all,
                                 Tensor(), all, test::f32(out, full_out), test::f32(lse, full_lse), mask, int(c.heads),
                                 int(c.kv_heads));

    RingAttention ring(*comm);
    const ContextSplit split = ring.split();
    auto q = local_rows(qkv, c.batch, c.seq, W, split), d_o = local_rows(dout, c.batch, c.seq, OW, split);
    auto kv0 = zeros(n * KW), kv1 = zeros(n * KW), block_out = zeros(n * OW), block_lse = zeros(n * c.heads);
    auto dq = zeros(n * OW), dkv0 = zeros(n * KW), dkv1 = zeros(n * KW);
    const RingBuffers buffers{{test::f32(kv0, Shape{n, KW}), test::f32(kv1, Shape{n, KW})},
                              test::f32(block_out, Shape{n, OW}),
                              test::f32(block_lse, Shape{n * c.heads}),
                              Tensor(),
                              test::f32(dq, Shape{n, OW}),
                              {test::f32(dkv0, Shape{n, KW}), test::f32(dkv1, Shape{n, KW})}};
    auto o = zeros(n * OW), l = zeros(n * c.heads), d = zeros(n * W);
    const Shape lq{c.batch, S, W}, lo{c.batch, S, OW}, ll{c.batch, c.heads, S};
    comm->reset_volume();
    ring.forward(cpu, test::f32(o, lo), test::f32(l, ll), test::f32(q, lq), mask, int(c.heads), int(c.kv_heads),
                 buffers);
    const std::int64_t block_bytes = n * KW * 4;
    EXPECT_EQ(comm->volume().send.payload_bytes, (cp - 1) * block_bytes);
    comm->reset_volume();
    ring.backward(cpu, test::f32(d, lq), test::f32(d_o, lo), test::f32(q, lq), test::f32(o, lo), test::f32(l, ll),
                  mask, int(c.heads), int(c.kv_heads), buffers);
    EXPECT_EQ(comm->volume().send.payload_bytes, (cp - 1) * block_bytes + cp * block_bytes);

    EXPECT_LT(test::rel_error(o, test::to_double(local_rows(out, c.batch, c.seq, OW, split))), 1e-6);
    EXPECT_LT(test::rel_error(l, test::to_double(local_rows(lse, c.batch * c.heads, c.seq, 1, split))), 1e-6);
    EXPECT_LT(test::rel_error(d, test::to_double(local_rows(dqkv, c.batch, c.seq, W, split))), 1e-5);
  }
}

}  // namespace
}  // namespace ustrain
