// Attention over blocks of the sequence, the one attention op family (kernels/backend.h): a
// range of query rows of qkv against a range of key rows, packed in kv (context parallelism's
// blocks, decoding's cache) or qkv's own (a self block: the whole sequence on one rank), the
// merge of partial results by log-sum-exp, and the block backward from the merged result.
//
// Queries go in tiles of kQueryTile rows: a tile needs only the keys its rows see under the
// mask (kernels/block_mask_rows.h), so the score block is (tile, the union of its rows' key
// ranges): under the causal mask the upper triangle is mostly skipped, under a window all but
// a band, under documents all but the tile's own documents. Each score block is two
// single-threaded GEMMs away from Q, K and V, which stay strided inside their tensors. OpenMP spreads (batch, head[, tile]) over the threads: at B=8,
// S=256, H=8, Hkv=4, Dh=32 on two cores this is about twice as fast as running the heads in
// turn with a two-thread GEMM.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention_block_operands.h"
#include "kernels/block_mask_rows.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

constexpr std::int64_t kQueryTile = kAttentionQueryTile;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Where a block's keys and values lie, and their gradients: rows of packed kv (B, Skv, 2 Hkv Dh)
// or the k and v columns of qkv's own rows (B, Sq, W); offsets in floats from the tensor's start.
struct KeyRows {
  std::int64_t seq = 0;          // rows per batch row
  std::int64_t stride = 0;       // floats per row
  std::int64_t first_key = 0;    // column of kv head 0's key
  std::int64_t value_shift = 0;  // from a kv head's key column to its value column
  std::int64_t key(std::int64_t b, std::int64_t row, std::int64_t kv_head, std::int64_t head_dim) const {
    return (b * seq + row) * stride + first_key + kv_head * head_dim;
  }
};

// The sizes of one block: queries from qkv (B, Sq, W), keys and values from kv or qkv.
struct BlockShape {
  std::int64_t batch, q_seq, width, heads, kv_heads, head_dim;
  KeyRows keys;
  bool self;  // keys from qkv's own rows
  SeqRange q, k;
  AttentionMask mask;
  std::int64_t group() const { return heads / kv_heads; }
  std::int64_t out_width() const { return heads * head_dim; }
};

// Softmax in place of query row r's scores pr, laid over the tile's keys `span`: the row's own
// keys get their probabilities, every other entry 0. Returns the row's log-sum-exp, -inf (and
// a row of zeros) when the mask leaves it no key.
float masked_softmax_row(const BlockMaskRows& rows, std::int64_t b, std::int64_t r, KeyRange span, float* pr) {
  const KeyRange k = rows.keys(b, r);
  const std::int64_t first = k.empty() ? 0 : k.begin - span.begin, end = k.empty() ? 0 : k.end - span.begin;
  if (!rows.exact(b))
    for (std::int64_t j = first; j < end; ++j)
      if (!rows.same_document(b, r, span.begin + j)) pr[j] = kNegInf;
  std::fill(pr, pr + first, 0.0f);
  std::fill(pr + end, pr + span.size(), 0.0f);
  const float m = end > first ? cpu::max_of(pr + first, end - first) : kNegInf;
  if (m == kNegInf) {
    std::fill(pr + first, pr + end, 0.0f);
    return kNegInf;
  }
  const double sum = cpu::exp_in_place(pr + first, end - first, m);
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t j = first; j < end; ++j) pr[j] *= inv;
  return static_cast<float>(m + std::log(sum));
}

// The probabilities of query row r from its scores pr (over the tile's keys `span`) and its
// merged log-sum-exp l: exp(score - l) on the row's keys, 0 elsewhere.
void masked_probabilities_row(const BlockMaskRows& rows, std::int64_t b, std::int64_t r, KeyRange span, float l,
                              float* pr) {
  const KeyRange k = rows.keys(b, r);
  const bool none = k.empty() || l == kNegInf;  // -inf: no block gave the row a key
  const std::int64_t first = none ? 0 : k.begin - span.begin, end = none ? 0 : k.end - span.begin;
  for (std::int64_t j = first; j < end; ++j) pr[j] = cpu::fast_exp(pr[j] - l);
  if (!rows.exact(b))
    for (std::int64_t j = first; j < end; ++j)
      if (!rows.same_document(b, r, span.begin + j)) pr[j] = 0.0f;
  std::fill(pr, pr + first, 0.0f);
  std::fill(pr + end, pr + span.size(), 0.0f);
}

BlockShape block_shape(const Tensor& qkv, SeqRange q, const Tensor& kv, SeqRange k, AttentionMask mask, int n_heads,
                       int n_kv_heads) {
  const BlockOperands o = block_operands(qkv, q, kv, k, n_heads, n_kv_heads);
  BlockShape b{o.batch, o.q_seq, o.width, n_heads, n_kv_heads, o.head_dim, {}, o.self, q, k, mask};
  const std::int64_t value_shift = b.kv_heads * b.head_dim;  // from a key head to its value head
  if (o.self)
    b.keys = {b.q_seq, b.width, b.heads * b.head_dim, value_shift};
  else
    b.keys = {o.kv_seq, 2 * value_shift, 0, value_shift};
  return b;
}

}  // namespace

void CpuBackend::attention_kv_pack(Tensor kv, Tensor qkv, int n_heads, int n_kv_heads) {
  const std::int64_t rows = qkv.shape.rows(), width = qkv.shape.last(), kv_width = kv.shape.last();
  const std::int64_t head_dim = width / (n_heads + 2 * n_kv_heads), skip = n_heads * head_dim;
  USTRAIN_ASSERT(kv.shape.rows() == rows && kv_width == 2 * n_kv_heads * head_dim && skip + kv_width == width,
                 "kv " + kv.shape.str() + " for qkv " + qkv.shape.str());
  const float* src = qkv.f32();
  float* dst = kv.f32();
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows > 64)
  for (std::int64_t r = 0; r < rows; ++r) std::copy_n(src + r * width + skip, kv_width, dst + r * kv_width);
}

void CpuBackend::attention_grad_pack(Tensor dqkv, Tensor dq, Tensor dkv) {
  const std::int64_t rows = dqkv.shape.rows(), q_width = dq.shape.last(), kv_width = dkv.shape.last();
  USTRAIN_ASSERT(dq.shape.rows() == rows && dkv.shape.rows() == rows && q_width + kv_width == dqkv.shape.last(),
                 "dqkv " + dqkv.shape.str() + " from dq " + dq.shape.str() + " and dkv " + dkv.shape.str());
  const float* q = dq.f32();
  const float* kv = dkv.f32();
  float* out = dqkv.f32();
  const std::int64_t width = q_width + kv_width;
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows > 64)
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy_n(q + r * q_width, q_width, out + r * width);
    std::copy_n(kv + r * kv_width, kv_width, out + r * width + q_width);
  }
}

void CpuBackend::attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                                         AttentionMask mask, int n_heads, int n_kv_heads) {
  const BlockShape a = block_shape(qkv, q, kv, k, mask, n_heads, n_kv_heads);
  const std::int64_t W = a.width, KW = a.keys.stride, Dh = a.head_dim, OW = a.out_width(), nq = q.count;
  USTRAIN_ASSERT(out.numel() == a.batch * nq * OW && out.shape.last() == OW && lse.numel() == a.batch * a.heads * nq,
                 "block out " + out.shape.str() + ", lse " + lse.shape.str() + " for " + std::to_string(nq) +
                     " queries");
  if (a.batch == 0 || nq == 0) return;
  const BlockMaskRows masked(mask, a.batch, nq, k.count);

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  const std::int64_t tile_floats = kQueryTile * std::max<std::int64_t>(k.count, 1);
  float* scratch = attention_scratch_.as<float>(static_cast<std::size_t>(threads_ * tile_floats));
  const std::int64_t tiles = (nq + kQueryTile - 1) / kQueryTile;
  const std::int64_t items = a.batch * a.heads * tiles;
  const float* key_base = a.self ? qkv.f32() : kv.f32();

  // Query rows [i0, i0 + rows) of head h of batch row b, scored together against their keys.
  const auto part = [&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows, float* p) {
    const KeyRange span = masked.tile_keys(b, i0, rows);
    const std::int64_t keys = span.size();
    const float* qp = qkv.f32() + (b * a.q_seq + q.begin + i0) * W + h * Dh;             // (rows, Dh), stride W
    const float* kp = key_base + a.keys.key(b, k.begin + span.begin, h / a.group(), Dh);  // (keys, Dh), stride KW
    const float* vp = kp + a.keys.value_shift;                                           // (keys, Dh), stride KW
    float* o = out.f32() + (b * nq + i0) * OW + h * Dh;                                  // (rows, Dh), stride OW
    float* row_lse = lse.f32() + (b * a.heads + h) * nq + i0;                            // (rows)
    if (keys == 0) {  // no row sees a key
      for (std::int64_t r = 0; r < rows; ++r) {
        row_lse[r] = kNegInf;
        std::fill_n(o + r * OW, Dh, 0.0f);
      }
      return;
    }
    // scores (rows, keys) = scale * Q K^T, then each row's softmax over its own keys
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(keys),
                static_cast<int>(Dh), scale, qp, static_cast<int>(W), kp, static_cast<int>(KW), 0.0f, p,
                static_cast<int>(keys));
    for (std::int64_t r = 0; r < rows; ++r) row_lse[r] = masked_softmax_row(masked, b, i0 + r, span, p + r * keys);
    // out (rows, Dh) = P V
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(Dh),
                static_cast<int>(keys), 1.0f, p, static_cast<int>(keys), vp, static_cast<int>(KW), 0.0f, o,
                static_cast<int>(OW));
  };
  // Every (batch, head, query tile) is independent; tiles may see more or fewer keys, so the
  // schedule is dynamic (the results do not depend on it). A tile goes in parts (part_rows).
#pragma omp parallel for schedule(dynamic) num_threads(threads_) if (items > 1)
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t bh = item / tiles, b = bh / a.heads, h = bh % a.heads;
    const std::int64_t i0 = (item % tiles) * kQueryTile, end = std::min(i0 + kQueryTile, nq);
    for (std::int64_t r0 = i0, rows = 0; r0 < end; r0 += rows) {
      rows = masked.part_rows(b, r0, end - r0);
      part(b, h, r0, rows, scratch + omp_get_thread_num() * tile_floats);
    }
  }
}

void CpuBackend::attention_merge(Tensor acc, Tensor lse, Tensor block_out, Tensor block_lse, SeqRange q) {
  USTRAIN_ASSERT(acc.shape.rank() == 3 && lse.shape.rank() == 3, "merge needs acc (B, S, H Dh) and lse (B, H, S)");
  const std::int64_t B = acc.shape[0], S = acc.shape[1], OW = acc.shape[2], H = lse.shape[1], Dh = OW / H;
  const std::int64_t nq = q.count;
  check_seq_range(q, S, "merged");
  USTRAIN_ASSERT(lse.shape[0] == B && lse.shape[2] == S && block_out.numel() == B * nq * OW &&
                     block_lse.numel() == B * H * nq,
                 "merge of block " + block_out.shape.str() + ", " + block_lse.shape.str() + " into " + acc.shape.str());
  const std::int64_t items = B * H;
#pragma omp parallel for schedule(static) num_threads(threads_) if (items * nq > 256)
  for (std::int64_t bh = 0; bh < items; ++bh) {
    const std::int64_t b = bh / H, h = bh % H;
    for (std::int64_t r = 0; r < nq; ++r) {
      float& l = lse.f32()[bh * S + q.begin + r];
      const float lb = block_lse.f32()[bh * nq + r];
      if (lb == kNegInf) continue;  // the block had no key for this row
      float* o = acc.f32() + (b * S + q.begin + r) * OW + h * Dh;
      const float* ob = block_out.f32() + (b * nq + r) * OW + h * Dh;
      const float m = std::max(l, lb);
      const double wa = l == kNegInf ? 0.0 : std::exp(static_cast<double>(l) - m);
      const double wb = std::exp(static_cast<double>(lb) - m);
      const double total = wa + wb;
      const auto fa = static_cast<float>(wa / total), fb = static_cast<float>(wb / total);
      for (std::int64_t d = 0; d < Dh; ++d) o[d] = fa * o[d] + fb * ob[d];
      l = static_cast<float>(m + std::log(total));
    }
  }
}

namespace {

// The tensors of one block backward, and how it writes dQ.
struct BackwardBuffers {
  const float *qkv, *keys, *out, *dout, *lse;
  float *dq, *key_grads;
  std::int64_t dq_stride;  // floats per row of dq
  float dq_beta;           // 1: the packed blocks' sums accumulate; 0: a self block overwrites
};

// The backward of one (batch row b, kv head g): it alone writes that kv head's dK, dV and its
// q heads' dQ, summing over q heads and tiles in a fixed order. A tile works on the keys its
// rows see (tile_keys), as the forward did. `p` holds 2 kQueryTile nk + kQueryTile floats.
void block_backward_group(const BlockShape& a, const BlockMaskRows& masked, const BackwardBuffers& t, std::int64_t b,
                          std::int64_t g, float* p) {
  const std::int64_t Sq = a.q_seq, W = a.width, KW = a.keys.stride, Dh = a.head_dim, OW = a.out_width();
  const SeqRange q = a.q, k = a.k;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  const int iW = static_cast<int>(W), iKW = static_cast<int>(KW), iDh = static_cast<int>(Dh);
  const int iOW = static_cast<int>(OW), iDW = static_cast<int>(t.dq_stride);
  const std::int64_t key_at = a.keys.key(b, k.begin, g, Dh);
  const float* kp = t.keys + key_at;  // (nk, Dh), row stride KW
  const float* vp = kp + a.keys.value_shift;
  float* dk = t.key_grads + key_at;
  float* dv = dk + a.keys.value_shift;
  if (t.dq_beta == 0.0f)  // overwritten: dK and dV sum from zero
    for (std::int64_t s = 0; s < k.count; ++s) {
      std::fill_n(dk + s * KW, Dh, 0.0f);
      std::fill_n(dv + s * KW, Dh, 0.0f);
    }
  float* dp = p + kQueryTile * k.count;       // (rows, keys)
  float* delta = dp + kQueryTile * k.count;  // (rows) = rowsum(dO * O)

  for (std::int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h) {
    const std::int64_t first_out = (b * Sq + q.begin) * OW + h * Dh;
    const float* qp = t.qkv + (b * Sq + q.begin) * W + h * Dh;  // (nq, Dh), row stride W
    const float* o = t.out + first_out;                         // (nq, Dh), row stride OW
    const float* d_o = t.dout + first_out;                      // (nq, Dh), row stride OW
    float* dqp = t.dq + (b * Sq + q.begin) * t.dq_stride + h * Dh;
    const float* row_lse = t.lse + (b * a.heads + h) * Sq + q.begin;

    for (std::int64_t i0 = 0, rows = 0; i0 < q.count; i0 += rows) {  // each tile in parts, as forward
      rows = masked.part_rows(b, i0, std::min(kQueryTile - i0 % kQueryTile, q.count - i0));
      const KeyRange span = masked.tile_keys(b, i0, rows);
      const std::int64_t keys = span.size();
      if (keys == 0) {  // no row sees a key here: an overwritten dQ is 0
        if (t.dq_beta == 0.0f)
          for (std::int64_t r = 0; r < rows; ++r) std::fill_n(dqp + (i0 + r) * t.dq_stride, Dh, 0.0f);
        continue;
      }
      const int ir = static_cast<int>(rows), ik = static_cast<int>(keys);
      const std::int64_t at = span.begin * KW;  // the tile's first key row
      // P (rows, keys) = exp(scale * Q K^T - lse), with the merged lse: this block's share.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ir, ik, iDh, scale, qp + i0 * W, iW, kp + at, iKW, 0.0f, p,
                  ik);
      for (std::int64_t r = 0; r < rows; ++r) {
        masked_probabilities_row(masked, b, i0 + r, span, row_lse[i0 + r], p + r * keys);
        delta[r] = static_cast<float>(cpu::dot(d_o + (i0 + r) * OW, o + (i0 + r) * OW, Dh));
      }
      // dV (keys, Dh) += P^T dO
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ik, iDh, ir, 1.0f, p, ik, d_o + i0 * OW, iOW, 1.0f, dv + at,
                  iKW);
      // dP (rows, keys) = dO V^T, then dS = P * (dP - delta) in place
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ir, ik, iDh, 1.0f, d_o + i0 * OW, iOW, vp + at, iKW, 0.0f,
                  dp, ik);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* pr = p + r * keys;
        float* ds = dp + r * keys;
        for (std::int64_t j = 0; j < keys; ++j) ds[j] = pr[j] * (ds[j] - delta[r]);
      }
      // dQ (rows, Dh) = (or +=) scale * dS K;  dK (keys, Dh) += scale * dS^T Q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ir, iDh, ik, scale, dp, ik, kp + at, iKW, t.dq_beta,
                  dqp + i0 * t.dq_stride, iDW);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ik, iDh, ir, scale, dp, ik, qp + i0 * W, iW, 1.0f, dk + at,
                  iKW);
    }
  }
}

}  // namespace

void CpuBackend::attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv,
                                          SeqRange k, Tensor out, Tensor lse, AttentionMask mask, int n_heads,
                                          int n_kv_heads) {
  const BlockShape a = block_shape(qkv, q, kv, k, mask, n_heads, n_kv_heads);
  const std::int64_t Sq = a.q_seq, OW = a.out_width();
  USTRAIN_ASSERT(out.numel() == a.batch * Sq * OW && dout.numel() == out.numel() &&
                     lse.numel() == a.batch * a.heads * Sq,
                 "block backward: out " + out.shape.str() + ", dout " + dout.shape.str() + ", lse " + lse.shape.str() +
                     " for qkv " + qkv.shape.str());
  if (a.self)
    USTRAIN_ASSERT(dq.shape == qkv.shape && dkv.empty() && q.begin == 0 && q.count == Sq && k.begin == 0 &&
                       k.count == Sq,
                   "self block backward: dqkv " + dq.shape.str() + " for qkv " + qkv.shape.str() +
                       ", no dkv, every query and key row");
  else
    USTRAIN_ASSERT(dq.numel() == out.numel() && dkv.shape == kv.shape,
                   "block backward: dq " + dq.shape.str() + ", dkv " + dkv.shape.str() + " for kv " + kv.shape.str());
  if (a.batch == 0 || q.count == 0 || k.count == 0) return;
  const BlockMaskRows masked(mask, a.batch, q.count, k.count);

  // Packed keys: fp32 sums that accumulate. A self block: the whole of dqkv, overwritten.
  const BackwardBuffers t{qkv.f32(), a.self ? qkv.f32() : kv.f32(), out.f32(), dout.f32(), lse.f32(),
                          dq.f32(),  a.self ? dq.f32() : dkv.f32(), a.self ? a.width : OW, a.self ? 0.0f : 1.0f};
  const std::int64_t thread_floats = 2 * kQueryTile * k.count + kQueryTile;
  float* scratch = attention_scratch_.as<float>(static_cast<std::size_t>(threads_ * thread_floats));
  const std::int64_t groups = a.batch * a.kv_heads;
#pragma omp parallel for schedule(static) num_threads(threads_) if (groups > 1)
  for (std::int64_t bg = 0; bg < groups; ++bg) {
    float* p = scratch + omp_get_thread_num() * thread_floats;
    block_backward_group(a, masked, t, bg / a.kv_heads, bg % a.kv_heads, p);
  }
}

}  // namespace ustrain
