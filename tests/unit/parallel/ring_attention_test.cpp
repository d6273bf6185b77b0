// Context parallelism's split and ring schedule as pure functions, the ring at cp = 1 (one self
// block), and the ring's block ops run for every rank in one process (the transfers replaced
// by indexing): the result equals the whole-sequence attention, forward and backward.
// tests/mpi/ring_attention_test.cpp runs the ring itself over MPI.
#include <gtest/gtest.h>

#include <set>

#include "kernels/record/recording_backend.h"
#include "tests/unit/kernels/reference.h"
#include "parallel/context_split.h"
#include "parallel/ring_attention.h"
#include "tests/unit/kernels/whole_attention.h"

namespace ustrain {
namespace {

using test::random_floats;

TEST(ContextSplit, RanksHoldTwoMirroredChunksThatCoverTheSequence) {
  for (int size : {1, 2, 3, 4, 8}) {
    const std::int64_t seq = 2 * size * 5;
    std::vector<int> owner(static_cast<std::size_t>(seq), -1);
    for (int rank = 0; rank < size; ++rank) {
      const auto runs = ContextSplit{size, rank}.runs(seq);
      EXPECT_EQ(runs[0].count + runs[1].count, seq / size);
      for (const SeqRange& r : runs)
        for (std::int64_t p = r.begin; p < r.begin + r.count; ++p) {
          EXPECT_EQ(owner[static_cast<std::size_t>(p)], -1) << "position " << p << " held twice";
          owner[static_cast<std::size_t>(p)] = rank;
        }
      if (size > 1) {
        EXPECT_EQ(runs[0].begin, rank * 5);
        EXPECT_EQ(runs[1].begin, (2 * size - 1 - rank) * 5);
      }
    }
    for (int o : owner) EXPECT_GE(o, 0);
  }
}

TEST(RingSchedule, EveryRankMeetsEveryBlockOnceWithTheSameWork) {
  for (int size : {1, 2, 3, 4, 8}) {
    const std::int64_t local = 2 * 6;  // two chunks of 6
    std::set<std::int64_t> work;
    for (int rank = 0; rank < size; ++rank) {
      const std::vector<RingBlock> blocks = ring_schedule(rank, size, local, AttentionMask::causal());
      ASSERT_EQ(blocks.size(), static_cast<std::size_t>(size));
      std::set<int> sources;
      for (std::size_t t = 0; t < blocks.size(); ++t) {
        EXPECT_EQ(blocks[t].source, (rank - static_cast<int>(t) + size) % size);
        sources.insert(blocks[t].source);
      }
      EXPECT_EQ(sources.size(), static_cast<std::size_t>(size));
      EXPECT_EQ(blocks[0].mask.kind, AttentionMask::Kind::causal);
      work.insert(score_entries(blocks));
    }
    // c (2c + 1) for the own block, 2 c^2 for each other one.
    EXPECT_EQ(work, (std::set<std::int64_t>{6 * 13 + (size - 1) * 2 * 36})) << size << " ranks";
  }
}

// At cp = 1 the whole sequence is one block against its own keys: one call each way, nothing
// packed, merged or copied, under either kind of mask.
TEST(RingAttention, OneRankIssuesOneSelfBlockEachWay) {
  const std::int64_t B = 2, S = 8, H = 4, Hkv = 2, Dh = 8;
  for (const AttentionMask& mask : {AttentionMask::causal(), AttentionMask::none()}) {
    RecordingBackend be;
    const auto planned = [&](Shape shape) {
      return Tensor(be.allocate(static_cast<std::size_t>(shape.numel()) * 4), shape);
    };
    const Tensor qkv = planned({B, S, (H + 2 * Hkv) * Dh}), out = planned({B, S, H * Dh}), lse = planned({B, H, S});
    RingAttention ring;
    ring.forward(be, out, lse, qkv, mask, H, Hkv, RingBuffers{});
    ring.backward(be, qkv, out, qkv, out, lse, mask, H, Hkv, RingBuffers{});
    ASSERT_EQ(be.ops().size(), 2u);
    // heads, kv heads, query rows, key rows, causal, no window, no documents
    const std::vector<std::int64_t> whole{H, Hkv, 0, S, 0, S, mask.kind == AttentionMask::Kind::causal ? 1 : 0, 0, 0};
    for (const RecordedOp& op : be.ops()) {
      EXPECT_EQ(op.args, whole) << op.name;
      const Shape& kv = op.shapes.at(std::string(op.name) == "attention_block_forward" ? 3 : 4);
      EXPECT_EQ(kv.rank(), 0) << op.name << ": the block's keys are qkv's own";
    }
    EXPECT_STREQ(be.ops()[0].name, "attention_block_forward");
    EXPECT_STREQ(be.ops()[1].name, "attention_block_backward");
  }
}

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
    for (const SeqRange& r : split.runs(g.seq))
      for (std::int64_t p = r.begin; p < r.begin + r.count; ++p) {
        const auto at = full.begin() + (static_cast<std::ptrdiff_t>(b) * g.seq + p) * columns;
        out.insert(out.end(), at, at + columns);
      }
  return out;
}

TEST(RingAttentionBlocks, EveryRanksBlocksEqualTheWholeSequence) {
  CpuBackend cpu(2);
  const Geometry cases[] = {{2, 64, 4, 4, 8}, {1, 96, 6, 2, 4}, {1, 1024, 4, 1, 8}};
  for (const Geometry& g : cases)
    for (int size : {2, 4}) {
      SCOPED_TRACE("S=" + std::to_string(g.seq) + " H=" + std::to_string(g.heads) + " Hkv=" +
                   std::to_string(g.kv_heads) + " cp=" + std::to_string(size));
      const int S = g.seq / size, W = g.width(), KW = g.kv_width(), OW = g.out_width();
      auto qkv = random_floats(static_cast<std::size_t>(g.batch * g.seq * W), 51, -2.0f, 2.0f);
      auto dout = random_floats(static_cast<std::size_t>(g.batch * g.seq * OW), 52);
      std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(g.batch * g.heads * g.seq));
      std::vector<float> dqkv(qkv.size());
      const Shape qkv_shape{g.batch, g.seq, W}, out_shape{g.batch, g.seq, OW};
      test::whole_attention_forward(cpu, test::f32(out, out_shape), test::f32(lse, Shape{g.batch, g.heads, g.seq}),
                                    test::f32(qkv, qkv_shape), g.heads, g.kv_heads);
      test::whole_attention_backward(cpu, test::f32(dqkv, qkv_shape), test::f32(dout, out_shape),
                                     test::f32(qkv, qkv_shape), test::f32(out, out_shape),
                                     test::f32(lse, Shape{g.batch, g.heads, g.seq}), g.heads, g.kv_heads);

      // Every rank's queries, packed kv, and (after the forward) merged results.
      const Shape lq{g.batch, S, W}, lkv{g.batch, S, KW}, lo{g.batch, S, OW}, ll{g.batch, g.heads, S};
      std::vector<std::vector<float>> q(size), kv(size), o(size), l(size), dq(size), dkv(size), d_o(size);
      for (int r = 0; r < size; ++r) {
        q[r] = local_rows(qkv, g, W, {size, r});
        d_o[r] = local_rows(dout, g, OW, {size, r});
        kv[r].resize(static_cast<std::size_t>(g.batch * S * KW));
        cpu.attention_kv_pack(test::f32(kv[r], lkv), test::f32(q[r], lq), g.heads, g.kv_heads);
        o[r].resize(static_cast<std::size_t>(g.batch * S * OW));
        l[r].resize(static_cast<std::size_t>(g.batch * g.heads * S));
        dq[r].assign(o[r].size(), 0.0f);
        dkv[r].assign(kv[r].size(), 0.0f);
      }
      for (int r = 0; r < size; ++r) {
        const std::vector<RingBlock> blocks = ring_schedule(r, size, S, AttentionMask::causal());
        for (std::size_t t = 0; t < blocks.size(); ++t) {
          const RingBlock& b = blocks[t];
          if (t == 0) {
            cpu.attention_block_forward(test::f32(o[r], lo), test::f32(l[r], ll), test::f32(q[r], lq), b.q,
                                        test::f32(kv[b.source], lkv), b.k, b.mask, g.heads, g.kv_heads);
            continue;
          }
          std::vector<float> bo(static_cast<std::size_t>(g.batch * b.q.count * OW));
          std::vector<float> bl(static_cast<std::size_t>(g.batch * g.heads * b.q.count));
          const Shape bos{g.batch, b.q.count, OW}, bls{g.batch, g.heads, b.q.count};
          cpu.attention_block_forward(test::f32(bo, bos), test::f32(bl, bls), test::f32(q[r], lq), b.q,
                                      test::f32(kv[b.source], lkv), b.k, b.mask, g.heads, g.kv_heads);
          cpu.attention_merge(test::f32(o[r], lo), test::f32(l[r], ll), test::f32(bo, bos), test::f32(bl, bls), b.q);
        }
      }
      for (int r = 0; r < size; ++r) {
        for (const RingBlock& b : ring_schedule(r, size, S, AttentionMask::causal()))
          cpu.attention_block_backward(test::f32(dq[r], lo), test::f32(dkv[b.source], lkv), test::f32(d_o[r], lo),
                                       test::f32(q[r], lq), b.q, test::f32(kv[b.source], lkv), b.k,
                                       test::f32(o[r], lo), test::f32(l[r], ll), b.mask, g.heads, g.kv_heads);
      }
      for (int r = 0; r < size; ++r) {
        const std::vector<float> want_out = local_rows(out, g, OW, {size, r});
        const std::vector<float> want_d = local_rows(dqkv, g, W, {size, r});
        std::vector<float> got_d(want_d.size());
        cpu.attention_grad_pack(test::f32(got_d, lq), test::f32(dq[r], lo), test::f32(dkv[r], lkv));
        EXPECT_LT(test::rel_error(o[r], test::to_double(want_out)), 1e-6) << "rank " << r;
        EXPECT_LT(test::rel_error(got_d, test::to_double(want_d)), 1e-5) << "rank " << r;
      }
    }
}

}  // namespace
}  // namespace ustrain
