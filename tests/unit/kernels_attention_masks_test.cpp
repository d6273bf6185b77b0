// The CPU block kernels under sliding windows and document ids against a float64 reference
// written from the mask's semantics (kernels_masked_reference.h): forward out and lse, and the
// block backward's dq, dk, dv; MHA, GQA and MQA; documents of length 1, a window of 1, a
// document longer than the window, blocks and rows with no allowed key, unsorted ids.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels_masked_reference.h"
#include "kernels_reference.h"

namespace ustrain {
namespace {

using Kind = AttentionMask::Kind;
using DocOf = std::function<std::int32_t(std::int64_t, std::int64_t)>;

struct MaskCase {
  const char* name;
  int batch, q_seq, kv_seq, heads, kv_heads, head_dim;
  SeqRange q, k;
  Kind kind;
  std::int64_t window, q_first, k_first;
  DocOf doc;  // empty: no documents
  int width() const { return (heads + 2 * kv_heads) * head_dim; }
  int kv_width() const { return 2 * kv_heads * head_dim; }
  int out_width() const { return heads * head_dim; }
};

// Document ids of positions 0 .. n - 1 of each batch row, (B, n).
std::vector<std::int32_t> doc_table(const DocOf& doc, int batch, std::int64_t n) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * n));
  for (int b = 0; b < batch; ++b)
    for (std::int64_t p = 0; p < n; ++p) ids[static_cast<std::size_t>(b * n + p)] = doc(b, p);
  return ids;
}

// ||got - want|| small relative to want; exactly 0 where want is 0 everywhere.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  double norm = 0;
  for (double w : want) norm += w * w;
  if (norm == 0) {
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 0.0f) << what << " at " << i;
    return;
  }
  EXPECT_LT(test::rel_error(got, want), tol) << what;
}

void expect_lse(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_TRUE(std::isinf(got[i]) && got[i] < 0) << what << " lse " << i << " = " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << what << " lse " << i;
    }
  }
}

// Rows [first, first + n) of head column `col` (width dh) of a (B, S, C) tensor, batch row b.
std::vector<std::vector<double>> rows_of(const std::vector<float>& t, std::int64_t seq, int c, int b, std::int64_t first,
                                         std::int64_t n, int col, int dh) {
  std::vector<std::vector<double>> r(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(dh)));
  for (std::int64_t i = 0; i < n; ++i)
    for (int d = 0; d < dh; ++d)
      r[static_cast<std::size_t>(i)][static_cast<std::size_t>(d)] =
          t[static_cast<std::size_t>((b * seq + first + i) * c + col + d)];
  return r;
}

std::vector<std::int64_t> positions(std::int64_t first, std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = first + i;
  return p;
}

DocOf runs_of(std::int64_t length) {
  return [length](std::int64_t, std::int64_t p) { return static_cast<std::int32_t>(p / length); };
}

const MaskCase kCases[] = {
    {"documents of length 1, MHA", 2, 70, 70, 2, 2, 8, {0, 70}, {0, 70}, Kind::causal, 0, 0, 0,
     [](std::int64_t b, std::int64_t p) {  // row 0: five of length 1, then runs of 9; row 1: the tail of length 1
       return static_cast<std::int32_t>(b == 0 ? (p < 5 ? p : 5 + (p - 5) / 9) : (p < 40 ? p / 13 : p - 37));
     }},
    {"a window of 1, GQA", 1, 70, 70, 4, 2, 8, {0, 70}, {0, 70}, Kind::causal, 1, 0, 0, {}},
    {"a document longer than the window, MQA", 1, 130, 130, 4, 1, 8, {0, 130}, {0, 130}, Kind::causal, 16, 0, 0,
     [](std::int64_t, std::int64_t p) { return static_cast<std::int32_t>(p < 100 ? 0 : 1 + (p - 100) / 7); }},
    {"window and documents, keys of another rank", 2, 40, 40, 4, 2, 4, {4, 30}, {2, 30}, Kind::none, 25, 60, 40,
     runs_of(11)},
    {"a block with no allowed pair", 1, 30, 30, 2, 1, 4, {0, 30}, {0, 30}, Kind::none, 50, 100, 0, {}},
    {"rows with no allowed key", 1, 20, 20, 2, 1, 4, {0, 20}, {0, 20}, Kind::none, 6, 40, 20, runs_of(7)},
    {"unsorted document ids, GQA", 2, 70, 70, 4, 2, 4, {0, 70}, {0, 70}, Kind::causal, 0, 0, 0,
     [](std::int64_t b, std::int64_t p) { return static_cast<std::int32_t>((p * 7 + b) % 3); }},
    {"fewer queries than keys, window and documents", 1, 8, 10, 2, 1, 4, {1, 7}, {0, 10}, Kind::causal, 4, 23, 20,
     runs_of(5)},
    {"documents without order, MQA", 1, 70, 70, 3, 1, 8, {0, 70}, {0, 70}, Kind::none, 0, 0, 0, runs_of(20)},
};

AttentionMask mask_of(const MaskCase& c, std::vector<std::int32_t>& q_docs, std::vector<std::int32_t>& k_docs) {
  AttentionMask m = AttentionMask::with_kind(c.kind);
  m.window = c.window;
  m.q_first = c.q_first;
  m.k_first = c.k_first;
  if (c.doc) {
    q_docs = doc_table(c.doc, c.batch, c.q_first + c.q.count);
    k_docs = doc_table(c.doc, c.batch, c.k_first + c.k.count);
    m.q_documents = test::i32(q_docs, Shape{c.batch, c.q_first + c.q.count});
    m.k_documents = test::i32(k_docs, Shape{c.batch, c.k_first + c.k.count});
  }
  return m;
}

test::MaskSemantics semantics_of(const MaskCase& c) { return {c.kind == Kind::causal, c.window, c.doc}; }

TEST(CpuMaskedAttention, PackedBlocksMatchFloat64ForwardAndBackward) {
  CpuBackend cpu(2);
  for (const MaskCase& c : kCases) {
    const std::int64_t nq = c.q.count, nk = c.k.count;
    const int dh = c.head_dim, ow = c.out_width(), kw = c.kv_width(), group = c.heads / c.kv_heads;
    auto qkv = test::random_floats(static_cast<std::size_t>(c.batch * c.q_seq * c.width()), 51, -2.0f, 2.0f);
    auto kv = test::random_floats(static_cast<std::size_t>(c.batch * c.kv_seq * kw), 52, -2.0f, 2.0f);
    auto dout = test::random_floats(static_cast<std::size_t>(c.batch * c.q_seq * ow), 53);
    std::vector<std::int32_t> q_docs, k_docs;
    const AttentionMask mask = mask_of(c, q_docs, k_docs);
    const Shape qkv_s{c.batch, c.q_seq, c.width()}, kv_s{c.batch, c.kv_seq, kw}, full_s{c.batch, c.q_seq, ow};
    std::vector<float> out(static_cast<std::size_t>(c.batch * nq * ow), 7.0f);
    std::vector<float> lse(static_cast<std::size_t>(c.batch * c.heads * nq), 7.0f);
    cpu.attention_block_forward(test::f32(out, Shape{c.batch, nq, ow}), test::f32(lse, Shape{c.batch, c.heads, nq}),
                                test::f32(qkv, qkv_s), c.q, test::f32(kv, kv_s), c.k, mask, c.heads, c.kv_heads);
    // The block's result as the merged result of every query row of qkv (rows outside it 0).
    std::vector<float> out_full(dout.size(), 0.0f), lse_full(static_cast<std::size_t>(c.batch * c.heads * c.q_seq));
    std::vector<double> want_out(out.size()), want_lse(lse.size());
    std::vector<double> want_dq(dout.size(), 0.5), want_dkv(kv.size(), 0.25);
    for (int b = 0; b < c.batch; ++b)
      for (int h = 0; h < c.heads; ++h) {
        const int g = h / group;
        test::HeadRows x{rows_of(qkv, c.q_seq, c.width(), b, c.q.begin, nq, h * dh, dh),
                         rows_of(kv, c.kv_seq, kw, b, c.k.begin, nk, g * dh, dh),
                         rows_of(kv, c.kv_seq, kw, b, c.k.begin, nk, (c.kv_heads + g) * dh, dh),
                         rows_of(dout, c.q_seq, ow, b, c.q.begin, nq, h * dh, dh)};
        const test::HeadResult r =
            test::masked_head(semantics_of(c), b, positions(c.q_first, nq), positions(c.k_first, nk), x);
        for (std::int64_t i = 0; i < nq; ++i) {
          const std::size_t at = static_cast<std::size_t>((b * nq + i) * ow + h * dh);
          const std::size_t full = static_cast<std::size_t>((b * c.q_seq + c.q.begin + i) * ow + h * dh);
          const std::size_t l = static_cast<std::size_t>((b * c.heads + h) * nq + i);
          want_lse[l] = r.lse[static_cast<std::size_t>(i)];
          lse_full[static_cast<std::size_t>((b * c.heads + h) * c.q_seq + c.q.begin + i)] = lse[l];
          for (int d = 0; d < dh; ++d) {
            want_out[at + d] = r.out[static_cast<std::size_t>(i)][static_cast<std::size_t>(d)];
            out_full[full + d] = out[at + d];
            want_dq[full + d] += r.dq[static_cast<std::size_t>(i)][static_cast<std::size_t>(d)];
          }
        }
        for (std::int64_t j = 0; j < nk; ++j)
          for (int d = 0; d < dh; ++d) {
            const std::size_t row = static_cast<std::size_t>((b * c.kv_seq + c.k.begin + j) * kw);
            const std::size_t jj = static_cast<std::size_t>(j), dd = static_cast<std::size_t>(d);
            want_dkv[row + static_cast<std::size_t>(g * dh + d)] += r.dk[jj][dd];
            want_dkv[row + static_cast<std::size_t>((c.kv_heads + g) * dh + d)] += r.dv[jj][dd];
          }
      }
    expect_close(out, want_out, test::kForwardTol, std::string(c.name) + ": out");
    expect_lse(lse, want_lse, c.name);
    std::vector<float> dq(dout.size(), 0.5f), dkv(kv.size(), 0.25f);  // accumulated onto
    // dout outside the block's rows is 0: only the block's rows carry a gradient.
    std::vector<float> dout_full(dout.size(), 0.0f);
    for (int b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < nq; ++i)
        for (int j = 0; j < ow; ++j) {
          const std::size_t full = static_cast<std::size_t>((b * c.q_seq + c.q.begin + i) * ow + j);
          dout_full[full] = dout[full];
        }
    cpu.attention_block_backward(test::f32(dq, full_s), test::f32(dkv, kv_s), test::f32(dout_full, full_s),
                                 test::f32(qkv, qkv_s), c.q, test::f32(kv, kv_s), c.k, test::f32(out_full, full_s),
                                 test::f32(lse_full, Shape{c.batch, c.heads, c.q_seq}), mask, c.heads, c.kv_heads);
    expect_close(dq, want_dq, test::kBackwardTol, std::string(c.name) + ": dq");
    expect_close(dkv, want_dkv, test::kBackwardTol, std::string(c.name) + ": dkv");
  }
}

TEST(CpuMaskedAttention, ASelfBlockUnderWindowAndDocumentsMatchesFloat64) {
  // The whole sequence on one rank: dqkv overwritten, GQA, documents of length 1 to 40 across
  // the kernel's query tiles, a window shorter than the longest document.
  CpuBackend cpu(2);
  const int B = 2, S = 150, H = 4, Hkv = 2, dh = 8, W = (H + 2 * Hkv) * dh, ow = H * dh;
  const std::int64_t starts[] = {0, 1, 2, 3, 43, 44, 90, 91, 120, 149};
  const DocOf doc = [&](std::int64_t b, std::int64_t p) {
    std::int32_t d = 0;
    for (std::int64_t s : starts) d += p >= (b == 0 ? s : (s * 7) % S) ? 1 : 0;
    return b == 0 ? d : static_cast<std::int32_t>(p / 37);
  };
  std::vector<std::int32_t> docs = doc_table(doc, B, S);
  AttentionMask mask = AttentionMask::causal();
  mask.window = 30;
  mask.q_documents = mask.k_documents = test::i32(docs, Shape{B, S});
  auto qkv = test::random_floats(static_cast<std::size_t>(B * S * W), 61, -2.0f, 2.0f);
  auto dout = test::random_floats(static_cast<std::size_t>(B * S * ow), 62);
  std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(B * H * S)), dqkv(qkv.size(), 9.0f);
  const Shape qs{B, S, W}, os{B, S, ow}, ls{B, H, S};
  const SeqRange all{0, S};
  cpu.attention_block_forward(test::f32(out, os), test::f32(lse, ls), test::f32(qkv, qs), all, Tensor(), all, mask, H,
                              Hkv);
  cpu.attention_block_backward(test::f32(dqkv, qs), Tensor(), test::f32(dout, os), test::f32(qkv, qs), all, Tensor(),
                               all, test::f32(out, os), test::f32(lse, ls), mask, H, Hkv);
  std::vector<double> want_out(out.size()), want_lse(lse.size()), want_dqkv(qkv.size(), 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int g = h / (H / Hkv);
      test::HeadRows x{rows_of(qkv, S, W, b, 0, S, h * dh, dh), rows_of(qkv, S, W, b, 0, S, (H + g) * dh, dh),
                       rows_of(qkv, S, W, b, 0, S, (H + Hkv + g) * dh, dh), rows_of(dout, S, ow, b, 0, S, h * dh, dh)};
      const test::HeadResult r = test::masked_head({true, 30, doc}, b, positions(0, S), positions(0, S), x);
      for (std::size_t i = 0; i < static_cast<std::size_t>(S); ++i) {
        want_lse[(b * H + h) * S + i] = r.lse[i];
        const std::size_t row = (b * S + i) * W;
        for (std::size_t d = 0; d < dh; ++d) {
          want_out[(b * S + i) * ow + h * dh + d] = r.out[i][d];
          want_dqkv[row + h * dh + d] = r.dq[i][d];
          want_dqkv[row + (H + g) * dh + d] += r.dk[i][d];
          want_dqkv[row + (H + Hkv + g) * dh + d] += r.dv[i][d];
        }
      }
    }
  expect_close(out, want_out, test::kForwardTol, "self block out");
  expect_lse(lse, want_lse, "self block");
  expect_close(dqkv, want_dqkv, test::kBackwardTol, "self block dqkv");
}

}  // namespace
}  // namespace ustrain
