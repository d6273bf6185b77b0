// Attention over blocks of the sequence (context parallelism): a range of query rows of qkv
// against a range of packed key/value rows, the merge of partial results by log-sum-exp, and
// the block backward from the merged result. The same tiling as the whole-sequence op
// (cpu_attention.cpp): score blocks of kQueryTile query rows, two single-threaded GEMMs away
// from Q, K and V, which stay strided in their tensors.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

constexpr std::int64_t kQueryTile = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The sizes of one block: queries from qkv (B, Sq, W), keys and values from kv (B, Skv, KW).
struct BlockShape {
  std::int64_t batch, q_seq, kv_seq, width, kv_width, heads, kv_heads, head_dim;
  SeqRange q, k;
  AttentionMask mask;
  std::int64_t group() const { return heads / kv_heads; }
  std::int64_t out_width() const { return heads * head_dim; }
  // Keys of the block query row r (of the range) sees.
  std::int64_t visible(std::int64_t r) const {
    if (mask.kind == AttentionMask::Kind::none) return k.count;
    return std::clamp<std::int64_t>(r + 1 + k.count - q.count, 0, k.count);
  }
};

void check_range(const SeqRange& r, std::int64_t seq, const char* what) {
  USTRAIN_ASSERT(r.begin >= 0 && r.count >= 0 && r.begin + r.count <= seq,
                 std::string(what) + " rows [" + std::to_string(r.begin) + ", " + std::to_string(r.begin + r.count) +
                     ") outside a sequence of " + std::to_string(seq));
}

BlockShape block_shape(const Tensor& qkv, SeqRange q, const Tensor& kv, SeqRange k, AttentionMask mask, int n_heads,
                       int n_kv_heads) {
  USTRAIN_ASSERT(qkv.shape.rank() == 3 && kv.shape.rank() == 3 && qkv.shape[0] == kv.shape[0],
                 "block attention needs qkv (B, Sq, W) and kv (B, Skv, 2 Hkv Dh), got " + qkv.shape.str() + " and " +
                     kv.shape.str());
  USTRAIN_ASSERT(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
                 std::to_string(n_heads) + " query heads do not split into groups of " + std::to_string(n_kv_heads));
  BlockShape b{qkv.shape[0], qkv.shape[1], kv.shape[1], qkv.shape[2], kv.shape[2], n_heads, n_kv_heads, 0, q, k, mask};
  const std::int64_t slots = b.heads + 2 * b.kv_heads;
  USTRAIN_ASSERT(b.width % slots == 0, "qkv width " + std::to_string(b.width) + " is not a multiple of H + 2 Hkv");
  b.head_dim = b.width / slots;
  USTRAIN_ASSERT(b.kv_width == 2 * b.kv_heads * b.head_dim, "kv " + kv.shape.str() + " for qkv " + qkv.shape.str());
  check_range(q, b.q_seq, "query");
  check_range(k, b.kv_seq, "key");
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
  require_implemented_mask(mask, "attention_block_forward");
  const BlockShape a = block_shape(qkv, q, kv, k, mask, n_heads, n_kv_heads);
  const std::int64_t W = a.width, KW = a.kv_width, Dh = a.head_dim, OW = a.out_width(), nq = q.count;
  USTRAIN_ASSERT(out.numel() == a.batch * nq * OW && lse.numel() == a.batch * a.heads * nq,
                 "block out " + out.shape.str() + ", lse " + lse.shape.str() + " for " + std::to_string(nq) + " queries");
  if (a.batch == 0 || nq == 0) return;

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  const std::int64_t tile_floats = kQueryTile * std::max<std::int64_t>(k.count, 1);
  float* scratch = attention_scratch_.as<float>(static_cast<std::size_t>(threads_ * tile_floats));
  const std::int64_t tiles = (nq + kQueryTile - 1) / kQueryTile;
  const std::int64_t items = a.batch * a.heads * tiles;

#pragma omp parallel for schedule(dynamic) num_threads(threads_) if (items > 1)
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t bh = item / tiles, b = bh / a.heads, h = bh % a.heads, g = h / a.group();
    const std::int64_t i0 = (item % tiles) * kQueryTile;
    const float* qp = qkv.f32() + (b * a.q_seq + q.begin) * W + h * Dh;      // (nq, Dh), row stride W
    const float* kp = kv.f32() + (b * a.kv_seq + k.begin) * KW + g * Dh;     // (nk, Dh), row stride KW
    const float* vp = kp + a.kv_heads * Dh;                                 // (nk, Dh), row stride KW
    float* o = out.f32() + b * nq * OW + h * Dh;                            // (nq, Dh), row stride OW
    float* row_lse = lse.f32() + bh * nq;                                   // (nq)
    float* p = scratch + omp_get_thread_num() * tile_floats;

    const std::int64_t rows = std::min(kQueryTile, nq - i0);
    const std::int64_t keys = a.visible(i0 + rows - 1);
    if (keys > 0)  // scores (rows, keys) = scale * Q K^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(keys),
                  static_cast<int>(Dh), scale, qp + i0 * W, static_cast<int>(W), kp, static_cast<int>(KW), 0.0f, p,
                  static_cast<int>(keys));
    for (std::int64_t r = 0; r < rows; ++r) {
      float* pr = p + r * keys;
      const std::int64_t visible = a.visible(i0 + r);
      if (visible == 0) {
        row_lse[i0 + r] = kNegInf;
        std::fill(pr, pr + keys, 0.0f);
        continue;
      }
      const float m = cpu::max_of(pr, visible);
      const double sum = cpu::exp_in_place(pr, visible, m);
      row_lse[i0 + r] = static_cast<float>(m + std::log(sum));
      const float inv = static_cast<float>(1.0 / sum);
      for (std::int64_t j = 0; j < visible; ++j) pr[j] *= inv;
      std::fill(pr + visible, pr + keys, 0.0f);
    }
    if (keys > 0)  // out (rows, Dh) = P V
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(Dh),
                  static_cast<int>(keys), 1.0f, p, static_cast<int>(keys), vp, static_cast<int>(KW), 0.0f, o + i0 * OW,
                  static_cast<int>(OW));
    else
      for (std::int64_t r = 0; r < rows; ++r) std::fill_n(o + (i0 + r) * OW, Dh, 0.0f);
  }
}

void CpuBackend::attention_merge(Tensor acc, Tensor lse, Tensor block_out, Tensor block_lse, SeqRange q) {
  USTRAIN_ASSERT(acc.shape.rank() == 3 && lse.shape.rank() == 3, "merge needs acc (B, S, H Dh) and lse (B, H, S)");
  const std::int64_t B = acc.shape[0], S = acc.shape[1], OW = acc.shape[2], H = lse.shape[1], Dh = OW / H;
  const std::int64_t nq = q.count;
  check_range(q, S, "merged");
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

void CpuBackend::attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv,
                                          SeqRange k, Tensor out, Tensor lse, AttentionMask mask, int n_heads,
                                          int n_kv_heads) {
  require_implemented_mask(mask, "attention_block_backward");
  const BlockShape a = block_shape(qkv, q, kv, k, mask, n_heads, n_kv_heads);
  const std::int64_t Sq = a.q_seq, W = a.width, KW = a.kv_width, Dh = a.head_dim, OW = a.out_width();
  USTRAIN_ASSERT(out.numel() == a.batch * Sq * OW && dout.numel() == out.numel() && dq.numel() == out.numel() &&
                     lse.numel() == a.batch * a.heads * Sq && dkv.shape == kv.shape,
                 "block backward: out " + out.shape.str() + ", dout " + dout.shape.str() + ", dq " + dq.shape.str() +
                     ", dkv " + dkv.shape.str() + ", lse " + lse.shape.str() + " for qkv " + qkv.shape.str());
  if (a.batch == 0 || q.count == 0 || k.count == 0) return;

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  const std::int64_t tile_floats = kQueryTile * k.count;
  const std::int64_t thread_floats = 2 * tile_floats + kQueryTile;
  float* scratch = attention_scratch_.as<float>(static_cast<std::size_t>(threads_ * thread_floats));
  const std::int64_t groups = a.batch * a.kv_heads;
  const int iW = static_cast<int>(W), iKW = static_cast<int>(KW), iDh = static_cast<int>(Dh), iOW = static_cast<int>(OW);

  // One task per (batch, kv head): it alone writes that kv head's dK, dV and its q heads' dQ.
#pragma omp parallel for schedule(static) num_threads(threads_) if (groups > 1)
  for (std::int64_t bg = 0; bg < groups; ++bg) {
    const std::int64_t b = bg / a.kv_heads, g = bg % a.kv_heads;
    const float* kp = kv.f32() + (b * a.kv_seq + k.begin) * KW + g * Dh;  // (nk, Dh), row stride KW
    const float* vp = kp + a.kv_heads * Dh;
    float* dk = dkv.f32() + (b * a.kv_seq + k.begin) * KW + g * Dh;
    float* dv = dk + a.kv_heads * Dh;
    float* p = scratch + omp_get_thread_num() * thread_floats;  // (rows, keys)
    float* dp = p + tile_floats;                                // (rows, keys)
    float* delta = dp + tile_floats;                            // (rows) = rowsum(dO * O)

    for (std::int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h) {
      const std::int64_t first = (b * Sq + q.begin) * W + h * Dh, first_out = (b * Sq + q.begin) * OW + h * Dh;
      const float* qp = qkv.f32() + first;        // (nq, Dh), row stride W
      const float* o = out.f32() + first_out;     // (nq, Dh), row stride OW
      const float* d_o = dout.f32() + first_out;  // (nq, Dh), row stride OW
      float* dqp = dq.f32() + first_out;          // (nq, Dh), row stride OW
      const float* row_lse = lse.f32() + (b * a.heads + h) * Sq + q.begin;

      for (std::int64_t i0 = 0; i0 < q.count; i0 += kQueryTile) {
        const std::int64_t rows = std::min(kQueryTile, q.count - i0);
        const std::int64_t keys = a.visible(i0 + rows - 1);
        if (keys == 0) continue;
        const int ir = static_cast<int>(rows), ik = static_cast<int>(keys);
        // P (rows, keys) = exp(scale * Q K^T - lse), with the merged lse: this block's share.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ir, ik, iDh, scale, qp + i0 * W, iW, kp, iKW, 0.0f, p, ik);
        for (std::int64_t r = 0; r < rows; ++r) {
          float* pr = p + r * keys;
          const std::int64_t visible = a.visible(i0 + r);
          const float l = row_lse[i0 + r];
          for (std::int64_t j = 0; j < visible; ++j) pr[j] = cpu::fast_exp(pr[j] - l);
          std::fill(pr + visible, pr + keys, 0.0f);
          delta[r] = static_cast<float>(cpu::dot(d_o + (i0 + r) * OW, o + (i0 + r) * OW, Dh));
        }
        // dV (keys, Dh) += P^T dO
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ik, iDh, ir, 1.0f, p, ik, d_o + i0 * OW, iOW, 1.0f, dv, iKW);
        // dP (rows, keys) = dO V^T, then dS = P * (dP - delta) in place
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ir, ik, iDh, 1.0f, d_o + i0 * OW, iOW, vp, iKW, 0.0f, dp, ik);
        for (std::int64_t r = 0; r < rows; ++r) {
          const float* pr = p + r * keys;
          float* ds = dp + r * keys;
          for (std::int64_t j = 0; j < keys; ++j) ds[j] = pr[j] * (ds[j] - delta[r]);
        }
        // dQ (rows, Dh) += scale * dS K;  dK (keys, Dh) += scale * dS^T Q
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ir, iDh, ik, scale, dp, ik, kp, iKW, 1.0f, dqp + i0 * OW,
                    iOW);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ik, iDh, ir, scale, dp, ik, qp + i0 * W, iW, 1.0f, dk, iKW);
      }
    }
  }
}

}  // namespace ustrain
