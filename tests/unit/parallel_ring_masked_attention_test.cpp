// The ring's blocks under a window and documents, run for every rank in one process (the
// transfers replaced by indexing, the running result started empty and merged as the ring
// does): at cp = 2 and 4 with the zig-zag split the result equals the whole-sequence op under
// the same mask, forward and backward. tests/mpi/ring_attention_test.cpp runs the ring itself.
#include <gtest/gtest.h>

#include <limits>

#include "kernels_reference.h"
#include "parallel/ring_attention.h"

namespace ustrain {
namespace {

struct Geometry {
  int batch, seq, heads, kv_heads, head_dim;
  int width() const { return (heads + 2 * kv_heads) * head_dim; }
  int kv_width() const { return 2 * kv_heads * head_dim; }
  int out_width() const { return heads * head_dim; }
};

// Rows of (B, S, C) `full` at the rank's positions, as (B, S / size, C).
std::vector<float> local_rows(const std::vector<float>& full, const Geometry& g, int columns, ContextSplit split) {
  std::vector<float> out;
  for (int b = 0; b < g.batch; ++b)
    for (const SeqRange& r : split.runs(g.seq)) {
      const auto at = full.begin() + (static_cast<std::ptrdiff_t>(b) * g.seq + r.begin) * columns;
      out.insert(out.end(), at, at + r.count * columns);
    }
  return out;
}

// Document ids of a packed window: documents of 1 to 3 W / 2 tokens, different in each sequence.
std::vector<std::int32_t> packed_documents(const Geometry& g, std::int64_t window) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(g.batch * g.seq));
  for (int b = 0; b < g.batch; ++b) {
    std::int32_t doc = 0;
    std::int64_t left = 1;
    for (int p = 0; p < g.seq; ++p) {
      if (left-- == 0) {
        ++doc;
        left = (p * 7 + b * 5) % (3 * window / 2);  // this document's length - 1
      }
      ids[static_cast<std::size_t>(b * g.seq + p)] = doc;
    }
  }
  return ids;
}

struct Ranks {
  std::vector<std::vector<float>> q, kv, o, l, dq, dkv, d_o;
};

// Every rank's forward and backward through its ring schedule.
void run_ring(CpuBackend& cpu, Ranks& x, const Geometry& g, int size, const AttentionMask& mask) {
  const int S = g.seq / size, W = g.width(), KW = g.kv_width(), OW = g.out_width();
  const Shape lq{g.batch, S, W}, lkv{g.batch, S, KW}, lo{g.batch, S, OW}, ll{g.batch, g.heads, S};
  const HostDocuments docs = HostDocuments::of(cpu, mask);
  for (int r = 0; r < size; ++r) {
    x.o[r].assign(static_cast<std::size_t>(g.batch * S * OW), 0.0f);
    x.l[r].assign(static_cast<std::size_t>(g.batch * g.heads * S), -std::numeric_limits<float>::infinity());
    for (const RingBlock& b : ring_schedule(r, size, S, mask, docs)) {
      std::vector<float> bo(static_cast<std::size_t>(g.batch * b.q.count * OW));
      std::vector<float> bl(static_cast<std::size_t>(g.batch * g.heads * b.q.count));
      const Shape bos{g.batch, b.q.count, OW}, bls{g.batch, g.heads, b.q.count};
      cpu.attention_block_forward(test::f32(bo, bos), test::f32(bl, bls), test::f32(x.q[r], lq), b.q,
                                  test::f32(x.kv[b.source], lkv), b.k, b.mask, g.heads, g.kv_heads);
      cpu.attention_merge(test::f32(x.o[r], lo), test::f32(x.l[r], ll), test::f32(bo, bos), test::f32(bl, bls), b.q);
    }
  }
  for (int r = 0; r < size; ++r)
    for (const RingBlock& b : ring_schedule(r, size, S, mask, docs))
      cpu.attention_block_backward(test::f32(x.dq[r], lo), test::f32(x.dkv[b.source], lkv), test::f32(x.d_o[r], lo),
                                   test::f32(x.q[r], lq), b.q, test::f32(x.kv[b.source], lkv), b.k,
                                   test::f32(x.o[r], lo), test::f32(x.l[r], ll), b.mask, g.heads, g.kv_heads);
}

TEST(RingMaskedAttention, EveryRanksBlocksEqualTheWholeSequenceUnderWindowAndDocuments) {
  CpuBackend cpu(2);
  const Geometry cases[] = {{2, 64, 4, 2, 8}, {1, 256, 4, 1, 8}};
  for (const Geometry& g : cases)
    // W = 18: some kv chunk ends W - 1 positions before a query chunk starts
    for (const std::int64_t window : {std::int64_t{0}, std::int64_t{5}, std::int64_t{18}})
      for (const bool with_documents : {false, true})
        for (int size : {2, 4}) {
          if (window == 0 && !with_documents) continue;
          SCOPED_TRACE("S=" + std::to_string(g.seq) + " Hkv=" + std::to_string(g.kv_heads) + " W=" +
                       std::to_string(window) + (with_documents ? " documents" : "") + " cp=" + std::to_string(size));
          const int S = g.seq / size, W = g.width(), KW = g.kv_width(), OW = g.out_width();
          std::vector<std::int32_t> ids = packed_documents(g, window > 0 ? window : 16);
          AttentionMask mask = AttentionMask::causal();
          mask.window = window;
          if (with_documents) mask.q_documents = mask.k_documents = test::i32(ids, Shape{g.batch, g.seq});
          auto qkv = test::random_floats(static_cast<std::size_t>(g.batch * g.seq * W), 71, -2.0f, 2.0f);
          auto dout = test::random_floats(static_cast<std::size_t>(g.batch * g.seq * OW), 72);
          std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(g.batch * g.heads * g.seq));
          std::vector<float> dqkv(qkv.size());
          const Shape qs{g.batch, g.seq, W}, os{g.batch, g.seq, OW}, ls{g.batch, g.heads, g.seq};
          const SeqRange all{0, g.seq};
          cpu.attention_block_forward(test::f32(out, os), test::f32(lse, ls), test::f32(qkv, qs), all, Tensor(), all,
                                      mask, g.heads, g.kv_heads);
          cpu.attention_block_backward(test::f32(dqkv, qs), Tensor(), test::f32(dout, os), test::f32(qkv, qs), all,
                                       Tensor(), all, test::f32(out, os), test::f32(lse, ls), mask, g.heads,
                                       g.kv_heads);
          Ranks x{std::vector<std::vector<float>>(size), {}, {}, {}, {}, {}, {}};
          x.kv = x.o = x.l = x.dq = x.dkv = x.d_o = x.q;
          for (int r = 0; r < size; ++r) {
            x.q[r] = local_rows(qkv, g, W, {size, r});
            x.d_o[r] = local_rows(dout, g, OW, {size, r});
            x.kv[r].resize(static_cast<std::size_t>(g.batch * S * KW));
            cpu.attention_kv_pack(test::f32(x.kv[r], Shape{g.batch, S, KW}), test::f32(x.q[r], Shape{g.batch, S, W}),
                                  g.heads, g.kv_heads);
            x.dq[r].assign(static_cast<std::size_t>(g.batch * S * OW), 0.0f);
            x.dkv[r].assign(x.kv[r].size(), 0.0f);
          }
          run_ring(cpu, x, g, size, mask);
          for (int r = 0; r < size; ++r) {
            const std::vector<float> want_out = local_rows(out, g, OW, {size, r});
            const std::vector<float> want_d = local_rows(dqkv, g, W, {size, r});
            std::vector<float> got_d(want_d.size());
            cpu.attention_grad_pack(test::f32(got_d, Shape{g.batch, S, W}), test::f32(x.dq[r], Shape{g.batch, S, OW}),
                                    test::f32(x.dkv[r], Shape{g.batch, S, KW}));
            EXPECT_LT(test::rel_error(x.o[r], test::to_double(want_out)), 1e-6) << "rank " << r;
            EXPECT_LT(test::rel_error(got_d, test::to_double(want_d)), 1e-5) << "rank " << r;
          }
        }
}

}  // namespace
}  // namespace ustrain
