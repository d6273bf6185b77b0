// The CUDA block attention ops under sliding windows and document ids (kernels/attention_mask.h)
// against the CPU reference, forward and backward: self blocks (cuDNN's whole-sequence graphs
// take a window in bf16 and f16, our kernels the rest) and packed blocks (a rank's own causal
// block, blocks off the diagonal whose positions differ, unequal lengths), windows of 1 and of
// the whole sequence, documents of length 1, documents with a window, rows that see no key, MHA,
// GQA and MQA. Rows without a key must give the empty contribution: lse -inf, out 0, no gradient.
//
// Tolerances as in gpu_attention_blocks_test.cpp: act's bound for results and gradients (cuDNN
// and our kernels round them to act), the fp32 bound for lse, -inf exactly where the CPU has it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu_attention_support.h"
#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

class GpuMaskedAttentionTest : public GpuActTest {};

// Document ids indexed by absolute position (kernels/attention_mask.h), (B, position + rows):
// from `position` on, consecutive documents of the given lengths (rotated by the batch row, so
// that rows differ) numbered from `first`; before it an id no block row has, so that reading
// the wrong columns shows.
std::vector<std::int32_t> document_ids(const std::vector<std::int64_t>& lengths, std::int64_t batch,
                                       std::int64_t position, std::int32_t first) {
  std::vector<std::int32_t> ids;
  const auto n = static_cast<std::int64_t>(lengths.size());
  for (std::int64_t b = 0; b < batch; ++b) {
    ids.insert(ids.end(), static_cast<std::size_t>(position), -7);
    for (std::int64_t d = 0; d < n; ++d)
      ids.insert(ids.end(), static_cast<std::size_t>(lengths[static_cast<std::size_t>((d + b) % n)]),
                 first + static_cast<std::int32_t>(d));
  }
  return ids;
}

struct MaskedCase {
  std::string name;
  std::int64_t batch, q_seq, kv_seq, heads, kv_heads, head_dim;
  SeqRange q, k;  // a self block's are every row
  bool self;
  AttentionMask::Kind kind;
  std::int64_t window, q_first, k_first;
  std::vector<std::int64_t> q_docs, k_docs;  // document lengths of the block's rows; empty: none
  std::int32_t k_first_doc = 0;              // the first key document's id (the queries' is 0)

  std::int64_t width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::int64_t kv_width() const { return 2 * kv_heads * head_dim; }
  std::int64_t out_width() const { return heads * head_dim; }
};

using Kind = AttentionMask::Kind;
// (name, B, Sq, Skv, H, Hkv, Dh, q rows, k rows, self, kind, window, q_first, k_first, docs)
const MaskedCase kCases[] = {
    {"self_window", 2, 100, 100, 8, 2, 64, {0, 100}, {0, 100}, true, Kind::causal, 16, 0, 0, {}, {}},
    {"self_window_of_one", 2, 45, 45, 4, 4, 32, {0, 45}, {0, 45}, true, Kind::causal, 1, 0, 0, {}, {}},
    {"self_window_spans_all", 1, 70, 70, 4, 2, 16, {0, 70}, {0, 70}, true, Kind::causal, 70, 0, 0, {}, {}},
    {"self_documents", 2, 128, 128, 8, 2, 64, {0, 128}, {0, 128}, true, Kind::causal, 0, 0, 0,
     {37, 5, 1, 60, 25}, {37, 5, 1, 60, 25}},
    {"self_documents_of_one", 1, 40, 40, 6, 1, 16, {0, 40}, {0, 40}, true, Kind::causal, 0, 0, 0,
     std::vector<std::int64_t>(40, 1), std::vector<std::int64_t>(40, 1)},
    {"self_documents_and_window", 2, 96, 96, 4, 2, 40, {0, 96}, {0, 96}, true, Kind::causal, 8, 0, 0,
     {50, 3, 43}, {50, 3, 43}},
    {"self_document_longer_than_window", 1, 90, 90, 4, 4, 256, {0, 90}, {0, 90}, true, Kind::causal, 20, 0, 0,
     {70, 20}, {70, 20}},
    {"own_block_window", 2, 96, 96, 8, 2, 64, {40, 56}, {40, 56}, false, Kind::causal, 24, 40, 40, {}, {}},
    {"off_diagonal_window", 2, 70, 60, 8, 2, 64, {10, 40}, {5, 48}, false, Kind::none, 60, 100, 0, {}, {}},
    {"unequal_causal_documents", 3, 20, 30, 6, 1, 16, {2, 16}, {4, 24}, false, Kind::causal, 0, 10, 2,
     {6, 10}, {4, 8, 12}},
    {"off_diagonal_documents", 2, 64, 64, 4, 2, 128, {0, 40}, {10, 50}, false, Kind::none, 0, 60, 10,
     {10, 20, 10}, {5, 30, 15}, 1},
    {"documents_and_window_gqa", 2, 80, 80, 8, 2, 64, {16, 64}, {0, 64}, false, Kind::none, 30, 16, 0,
     {9, 30, 25}, {25, 9, 30}},
};

// A case's mask, its document ids on the device (kept in `owned`) and on the host.
struct Masks {
  AttentionMask gpu, cpu;
  std::vector<std::int32_t> q_ids, k_ids;
  std::vector<std::unique_ptr<DeviceTensor>> owned;
};

std::unique_ptr<Masks> masks_of(Backend& gpu, const MaskedCase& c) {
  auto m = std::make_unique<Masks>();
  m->gpu.kind = m->cpu.kind = c.kind;
  m->gpu.window = m->cpu.window = c.window;
  m->gpu.q_first = m->cpu.q_first = c.q_first;
  m->gpu.k_first = m->cpu.k_first = c.k_first;
  if (c.q_docs.empty()) return m;
  m->q_ids = document_ids(c.q_docs, c.batch, c.q_first, 0);
  m->k_ids = document_ids(c.k_docs, c.batch, c.k_first, c.k_first_doc);
  const Shape qs{c.batch, c.q_first + c.q.count}, ks{c.batch, c.k_first + c.k.count};
  for (auto* ids : {&m->q_ids, &m->k_ids}) {
    m->owned.push_back(std::make_unique<DeviceTensor>(gpu, ids == &m->q_ids ? qs : ks, DType::i32));
    m->owned.back()->upload_ids(*ids);
  }
  m->gpu.q_documents = *m->owned[0];
  m->gpu.k_documents = *m->owned[1];
  m->cpu.q_documents = host_ids(m->q_ids, qs);
  m->cpu.k_documents = host_ids(m->k_ids, ks);
  return m;
}

void expect_finite(const std::vector<float>& v, const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << what << ": " << v[i] << " at " << i;
}

// A self block: out and lse in act and fp32, then dqkv (overwritten) from the GPU's out.
void check_self(Backend& gpu, CpuBackend& cpu, DType act, const MaskedCase& c) {
  const std::int64_t OW = c.out_width();
  const Shape qs{c.batch, c.q_seq, c.width()}, os{c.batch, c.q_seq, OW}, ls{c.batch, c.heads, c.q_seq};
  const SeqRange all{0, c.q_seq};
  const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
  const auto masks = masks_of(gpu, c);
  auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 120, act, -2.0f, 2.0f);
  auto dout = random_values(static_cast<std::size_t>(os.numel()), 121, act);
  std::vector<float> out(static_cast<std::size_t>(os.numel())), lse(static_cast<std::size_t>(ls.numel()));
  cpu.attention_block_forward(host(out, os), host(lse, ls), host(qkv, qs), all, Tensor(), all, masks->cpu, h, hkv);

  auto gqkv = on_device(gpu, qkv, qs, act), gdout = on_device(gpu, dout, os, act);
  for (const DType result : {act, DType::f32}) {
    const std::string at = c.name + " results " + dtype_name(result);
    DeviceTensor gout(gpu, os, result), glse(gpu, ls, DType::f32);
    gpu.attention_block_forward(gout, glse, *gqkv, all, Tensor(), all, masks->gpu, h, hkv);
    auto out_values = gout.download();
    expect_close(out_values, out, act_tolerance(act, Measure::norm_rel), "self out " + at);
    expect_lse_close(glse.download(), lse, "self lse " + at);

    std::vector<float> dqkv(qkv.size(), 1234.0f);
    cpu.attention_block_backward(host(dqkv, qs), Tensor(), host(dout, os), host(qkv, qs), all, Tensor(), all,
                                 host(out_values, os), host(lse, ls), masks->cpu, h, hkv);
    auto gdqkv = on_device(gpu, std::vector<float>(qkv.size(), 1234.0f), qs, result);
    gpu.attention_block_backward(*gdqkv, Tensor(), *gdout, *gqkv, all, Tensor(), all, gout, glse, masks->gpu, h, hkv);
    expect_close(gdqkv->download(), dqkv, act_tolerance(act, Measure::norm_rel), "self dqkv " + at);
    if (act == DType::f32) break;  // one result dtype
  }
}

// A packed block: its fp32 out and lse, then the increments of the fp32 gradient sums from the
// result of this block alone (placed at its rows of the merged out and lse).
void check_packed(Backend& gpu, CpuBackend& cpu, DType act, const MaskedCase& c) {
  const std::int64_t OW = c.out_width(), KW = c.kv_width();
  const Shape qs{c.batch, c.q_seq, c.width()}, ks{c.batch, c.kv_seq, KW};
  const Shape os{c.batch, c.q_seq, OW}, ls{c.batch, c.heads, c.q_seq};
  const Shape bos{c.batch, c.q.count, OW}, bls{c.batch, c.heads, c.q.count};
  const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
  const auto masks = masks_of(gpu, c);
  auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 130, act, -2.0f, 2.0f);
  auto kv = random_values(static_cast<std::size_t>(ks.numel()), 131, act, -2.0f, 2.0f);
  auto dout = random_values(static_cast<std::size_t>(os.numel()), 132, act);
  std::vector<float> bout(static_cast<std::size_t>(bos.numel())), blse(static_cast<std::size_t>(bls.numel()));
  cpu.attention_block_forward(host(bout, bos), host(blse, bls), host(qkv, qs), c.q, host(kv, ks), c.k, masks->cpu, h,
                              hkv);
  auto gqkv = on_device(gpu, qkv, qs, act), gkv = on_device(gpu, kv, ks, act);
  DeviceTensor gbout(gpu, bos, DType::f32), gblse(gpu, bls, DType::f32);
  gpu.fill(gbout, 1234.0f);  // overwritten
  gpu.attention_block_forward(gbout, gblse, *gqkv, c.q, *gkv, c.k, masks->gpu, h, hkv);
  expect_close(gbout.download(), bout, act_tolerance(act, Measure::norm_rel), "block out " + c.name);
  expect_lse_close(gblse.download(), blse, "block lse " + c.name);

  std::vector<float> out(static_cast<std::size_t>(os.numel()), 0.0f), lse(static_cast<std::size_t>(ls.numel()), kNegInf);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t r = 0; r < c.q.count; ++r) {
      for (std::int64_t d = 0; d < OW; ++d)
        out[static_cast<std::size_t>((b * c.q_seq + c.q.begin + r) * OW + d)] =
            bout[static_cast<std::size_t>((b * c.q.count + r) * OW + d)];
      for (std::int64_t hh = 0; hh < c.heads; ++hh)
        lse[static_cast<std::size_t>((b * c.heads + hh) * c.q_seq + c.q.begin + r)] =
            blse[static_cast<std::size_t>((b * c.heads + hh) * c.q.count + r)];
    }
  auto out_values = rounded(out, act);
  const auto dq0 = random_values(static_cast<std::size_t>(os.numel()), 133, DType::f32, -0.1f, 0.1f);
  const auto dkv0 = random_values(static_cast<std::size_t>(ks.numel()), 134, DType::f32, -0.1f, 0.1f);
  auto dq = dq0, dkv = dkv0;
  cpu.attention_block_backward(host(dq, os), host(dkv, ks), host(dout, os), host(qkv, qs), c.q, host(kv, ks), c.k,
                               host(out_values, os), host(lse, ls), masks->cpu, h, hkv);
  auto gdout = on_device(gpu, dout, os, act), gout = on_device(gpu, out_values, os, act);
  auto glse = on_device(gpu, lse, ls, DType::f32);
  auto gdq = on_device(gpu, dq0, os, DType::f32), gdkv = on_device(gpu, dkv0, ks, DType::f32);
  gpu.attention_block_backward(*gdq, *gdkv, *gdout, *gqkv, c.q, *gkv, c.k, *gout, *glse, masks->gpu, h, hkv);
  const auto got_dq = gdq->download(), got_dkv = gdkv->download();
  expect_finite(got_dq, "block dq " + c.name);
  expect_finite(got_dkv, "block dkv " + c.name);
  // The increments, k and v apart (their scales differ); rows outside the block must not move.
  const auto tol = act_tolerance(act, Measure::norm_rel);
  EXPECT_TRUE(same_bits(outside(got_dq, c.batch, c.q_seq, OW, c.q), outside(dq0, c.batch, c.q_seq, OW, c.q)))
      << "dq rows outside the block changed, " << c.name;
  EXPECT_TRUE(same_bits(outside(got_dkv, c.batch, c.kv_seq, KW, c.k), outside(dkv0, c.batch, c.kv_seq, KW, c.k)))
      << "dkv rows outside the block changed, " << c.name;
  expect_close(minus(got_dq, dq0), minus(dq, dq0), tol, "block dq " + c.name);
  for (const std::int64_t col : {std::int64_t{0}, KW / 2})
    expect_close(part(minus(got_dkv, dkv0), c.batch, c.kv_seq, KW, {0, c.kv_seq}, col, KW / 2),
                 part(minus(dkv, dkv0), c.batch, c.kv_seq, KW, {0, c.kv_seq}, col, KW / 2), tol,
                 (col == 0 ? "block dk " : "block dv ") + c.name);
}

TEST_P(GpuMaskedAttentionTest, MaskedBlocksMatchCpu) {
  for (const MaskedCase& c : kCases) {
    SCOPED_TRACE(c.name);
    if (c.self) check_self(gpu(), cpu(), act(), c);
    else check_packed(gpu(), cpu(), act(), c);
  }
}

// Query rows that see no key (their documents are not among the block's keys, or the window
// ends before the block's keys begin): lse -inf, out 0, no gradient, and no NaN anywhere.
TEST_P(GpuMaskedAttentionTest, RowsWithoutKeysGiveTheEmptyContribution) {
  const MaskedCase cases[] = {
      // Query documents 0, 1, 2 against key documents 1, 2, 3: the rows of document 0 see none.
      {"unseen_documents", 2, 40, 40, 4, 2, 32, {0, 40}, {0, 40}, false, Kind::none, 0, 0, 0, {12, 20, 8}, {8, 20, 12},
       1},
      // Positions 100 .. 139 against keys 0 .. 49 with a window of 60: rows from position 109 on see none.
      {"window_past_the_keys", 1, 40, 50, 4, 4, 64, {0, 40}, {0, 50}, false, Kind::none, 60, 100, 0, {}, {}},
  };
  for (const MaskedCase& c : cases) {
    const std::int64_t OW = c.out_width(), KW = c.kv_width();
    const Shape qs{c.batch, c.q_seq, c.width()}, ks{c.batch, c.kv_seq, KW};
    const Shape os{c.batch, c.q_seq, OW}, ls{c.batch, c.heads, c.q_seq};
    const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
    const auto masks = masks_of(gpu(), c);
    auto gqkv = on_device(gpu(), random_values(static_cast<std::size_t>(qs.numel()), 140, act()), qs, act());
    auto gkv = on_device(gpu(), random_values(static_cast<std::size_t>(ks.numel()), 141, act()), ks, act());
    DeviceTensor out(gpu(), os, DType::f32), lse(gpu(), ls, DType::f32);
    gpu().attention_block_forward(out, lse, *gqkv, c.q, *gkv, c.k, masks->gpu, h, hkv);
    const auto got_out = out.download(), got_lse = lse.download();
    expect_finite(got_out, c.name + " out");

    DeviceTensor out_act(gpu(), os, act()), dq(gpu(), os, DType::f32), dkv(gpu(), ks, DType::f32);
    gpu().convert(out_act, out);
    gpu().fill(dq, 0.0f);
    gpu().fill(dkv, 0.0f);
    auto gdout = on_device(gpu(), random_values(static_cast<std::size_t>(os.numel()), 142, act()), os, act());
    gpu().attention_block_backward(dq, dkv, *gdout, *gqkv, c.q, *gkv, c.k, out_act, lse, masks->gpu, h, hkv);
    const auto got_dq = dq.download();
    expect_finite(got_dq, c.name + " dq");
    expect_finite(dkv.download(), c.name + " dkv");
    std::int64_t empty_rows = 0;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t r = 0; r < c.q_seq; ++r) {
        const bool empty = got_lse[static_cast<std::size_t>(b * c.heads * c.q_seq + r)] == kNegInf;
        empty_rows += empty ? 1 : 0;
        for (std::int64_t d = 0; d < OW && empty; ++d) {
          const auto at = static_cast<std::size_t>((b * c.q_seq + r) * OW + d);
          ASSERT_EQ(got_out[at], 0.0f) << c.name << ": out of an empty row " << r;
          ASSERT_EQ(got_dq[at], 0.0f) << c.name << ": dq of an empty row " << r;
        }
      }
    EXPECT_GE(empty_rows, 8) << c.name << ": the case must have rows without keys";
  }
}

// A window spanning the sequence is no window: the same path and the same bits as causal alone.
TEST_P(GpuMaskedAttentionTest, AWindowSpanningTheSequenceChangesNothing) {
  const std::int64_t B = 2, S = 64, H = 4, Hkv = 2, Dh = 64, OW = H * Dh;
  const Shape qs{B, S, (H + 2 * Hkv) * Dh}, os{B, S, OW}, ls{B, H, S};
  const SeqRange all{0, S};
  auto gqkv = on_device(gpu(), random_values(static_cast<std::size_t>(qs.numel()), 150, act()), qs, act());
  std::vector<std::vector<float>> outs;
  for (const std::int64_t window : {std::int64_t{0}, S, 10 * S}) {
    AttentionMask mask = AttentionMask::causal();
    mask.window = window;
    DeviceTensor out(gpu(), os, act()), lse(gpu(), ls, DType::f32);
    gpu().attention_block_forward(out, lse, *gqkv, all, Tensor(), all, mask, H, Hkv);
    outs.push_back(out.download());
  }
  EXPECT_TRUE(same_bits(outs[0], outs[1]) && same_bits(outs[0], outs[2]));
}

INSTANTIATE_TEST_SUITE_P(Act, GpuMaskedAttentionTest, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
