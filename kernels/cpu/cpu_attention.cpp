// Causal grouped-query attention on the fused QKV rows, softmax scale 1/sqrt(Dh).
//
// Queries go in tiles of kQueryTile rows: a tile needs only the keys up to its last row
// (causality), so the score block is (tile, keys) and the upper triangle is mostly skipped.
// Each score block is two single-threaded GEMMs away from Q, K and V, which stay strided
// inside qkv (leading dimension W). OpenMP spreads (batch, head[, tile]) over the threads:
// at B=8, S=256, H=8, Hkv=4, Dh=32 on two cores this is about twice as fast as running the
// heads in turn with a two-thread GEMM.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

constexpr std::int64_t kQueryTile = 64;

struct AttentionShape {
  std::int64_t batch, seq, width, heads, kv_heads, head_dim;
  std::int64_t group() const { return heads / kv_heads; }  // q heads per kv head
  std::int64_t out_width() const { return heads * head_dim; }
  std::int64_t k_offset(std::int64_t kv_head) const { return (heads + kv_head) * head_dim; }
  std::int64_t v_offset(std::int64_t kv_head) const { return (heads + kv_heads + kv_head) * head_dim; }
};

AttentionShape attention_shape(const Tensor& qkv, int n_heads, int n_kv_heads) {
  USTRAIN_ASSERT(qkv.shape.rank() == 3, "qkv must be (B, S, W), got " + qkv.shape.str());
  USTRAIN_ASSERT(
      n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
      std::to_string(n_heads) + " query heads do not split into groups of " + std::to_string(n_kv_heads) + " kv heads");
  AttentionShape a{qkv.shape[0], qkv.shape[1], qkv.shape[2], n_heads, n_kv_heads, 0};
  const std::int64_t slots = a.heads + 2 * a.kv_heads;
  USTRAIN_ASSERT(
      a.width % slots == 0 && a.width > 0,
      "qkv width " + std::to_string(a.width) + " is not a multiple of H + 2 * Hkv = " + std::to_string(slots));
  a.head_dim = a.width / slots;
  return a;
}

}  // namespace

void CpuBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv, int n_heads, int n_kv_heads) {
  const AttentionShape a = attention_shape(qkv, n_heads, n_kv_heads);
  const std::int64_t S = a.seq, W = a.width, Dh = a.head_dim, OW = a.out_width();
  USTRAIN_ASSERT(out.numel() == a.batch * S * OW && out.shape.last() == OW,
                 "out " + out.shape.str() + " for qkv " + qkv.shape.str());
  USTRAIN_ASSERT(lse.numel() == a.batch * a.heads * S, "lse " + lse.shape.str() + " for qkv " + qkv.shape.str());
  if (a.batch == 0 || S == 0) return;

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  const std::int64_t tile_floats = kQueryTile * S;
  float* scratch = attention_scratch_.as<float>(static_cast<std::size_t>(threads_ * tile_floats));
  const float* base = qkv.f32();  // (B, S, W)
  float* o_base = out.f32();      // (B, S, H * Dh)
  float* lse_base = lse.f32();    // (B, H, S)
  const std::int64_t tiles = (S + kQueryTile - 1) / kQueryTile;
  const std::int64_t items = a.batch * a.heads * tiles;

  // Every (batch, head, query tile) is independent; later tiles see more keys, so the
  // schedule is dynamic (the results do not depend on it).
#pragma omp parallel for schedule(dynamic) num_threads(threads_) if (items > 1)
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t bh = item / tiles, b = bh / a.heads, h = bh % a.heads, kv = h / a.group();
    const std::int64_t i0 = (item % tiles) * kQueryTile;
    const float* q = base + b * S * W + h * Dh;  // (S, Dh), row stride W
    const float* k = base + b * S * W + a.k_offset(kv);
    const float* v = base + b * S * W + a.v_offset(kv);
    float* o = o_base + b * S * OW + h * Dh;  // (S, Dh), row stride H * Dh
    float* row_lse = lse_base + bh * S;       // (S)
    float* p = scratch + omp_get_thread_num() * tile_floats;

    const int rows = static_cast<int>(std::min(kQueryTile, S - i0));
    const int keys = static_cast<int>(i0) + rows;
    // scores (rows, keys) = scale * Q[i0:] K[:keys]^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, static_cast<int>(Dh), scale, q + i0 * W,
                static_cast<int>(W), k, static_cast<int>(W), 0.0f, p, keys);
    for (int r = 0; r < rows; ++r) {
      float* pr = p + static_cast<std::int64_t>(r) * keys;
      const std::int64_t visible = i0 + r + 1;  // keys 0..i
      const float m = cpu::max_of(pr, visible);
      const double sum = cpu::exp_in_place(pr, visible, m);
      row_lse[i0 + r] = static_cast<float>(m + std::log(sum));
      const float inv = static_cast<float>(1.0 / sum);
      for (std::int64_t j = 0; j < visible; ++j) pr[j] *= inv;
      std::fill(pr + visible, pr + keys, 0.0f);
    }
    // out (rows, Dh) = P (rows, keys) V[:keys]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, static_cast<int>(Dh), keys, 1.0f, p, keys, v,
                static_cast<int>(W), 0.0f, o + i0 * OW, static_cast<int>(OW));
  }
}

void CpuBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse, int n_heads,
                                    int n_kv_heads) {
  const AttentionShape a = attention_shape(qkv, n_heads, n_kv_heads);
  const std::int64_t S = a.seq, W = a.width, Dh = a.head_dim, OW = a.out_width();
  USTRAIN_ASSERT(dqkv.shape == qkv.shape, "dqkv " + dqkv.shape.str() + " vs qkv " + qkv.shape.str());
  USTRAIN_ASSERT(out.numel() == a.batch * S * OW && dout.numel() == out.numel(),
                 "out " + out.shape.str() + ", dout " + dout.shape.str() + " for qkv " + qkv.shape.str());
  USTRAIN_ASSERT(lse.numel() == a.batch * a.heads * S, "lse " + lse.shape.str() + " for qkv " + qkv.shape.str());
  if (a.batch == 0 || S == 0) return;

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  const std::int64_t tile_floats = kQueryTile * S;
  const std::int64_t thread_floats = 2 * tile_floats + kQueryTile;
  float* scratch = attention_scratch_.as<float>(static_cast<std::size_t>(threads_ * thread_floats));
  const float* base = qkv.f32();      // (B, S, W)
  float* d_base = dqkv.f32();         // (B, S, W)
  const float* o_base = out.f32();    // (B, S, H * Dh)
  const float* do_base = dout.f32();  // (B, S, H * Dh)
  const float* lse_base = lse.f32();  // (B, H, S)
  const std::int64_t groups = a.batch * a.kv_heads;
  const int iW = static_cast<int>(W), iDh = static_cast<int>(Dh), iOW = static_cast<int>(OW);

  // One task per (batch, kv head): it alone writes that kv head's dK, dV and its q heads'
  // dQ, summing over q heads and tiles in a fixed order.
#pragma omp parallel for schedule(static) num_threads(threads_) if (groups > 1)
  for (std::int64_t bg = 0; bg < groups; ++bg) {
    const std::int64_t b = bg / a.kv_heads, kv = bg % a.kv_heads;
    const float* k = base + b * S * W + a.k_offset(kv);  // (S, Dh), row stride W
    const float* v = base + b * S * W + a.v_offset(kv);
    float* dk = d_base + b * S * W + a.k_offset(kv);
    float* dv = d_base + b * S * W + a.v_offset(kv);
    for (std::int64_t s = 0; s < S; ++s) {
      std::fill(dk + s * W, dk + s * W + Dh, 0.0f);
      std::fill(dv + s * W, dv + s * W + Dh, 0.0f);
    }
    float* p = scratch + omp_get_thread_num() * thread_floats;  // (rows, keys)
    float* dp = p + tile_floats;                                // (rows, keys)
    float* delta = dp + tile_floats;                            // (rows) = rowsum(dO * O)

    for (std::int64_t h = kv * a.group(); h < (kv + 1) * a.group(); ++h) {
      const float* q = base + b * S * W + h * Dh;
      float* dq = d_base + b * S * W + h * Dh;
      const float* o = o_base + b * S * OW + h * Dh;  // (S, Dh), row stride H * Dh
      const float* d_o = do_base + b * S * OW + h * Dh;
      const float* row_lse = lse_base + (b * a.heads + h) * S;

      for (std::int64_t i0 = 0; i0 < S; i0 += kQueryTile) {
        const int rows = static_cast<int>(std::min(kQueryTile, S - i0));
        const int keys = static_cast<int>(i0) + rows;
        // P (rows, keys) = exp(scale * Q K^T - lse), recomputed rather than stored.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, iDh, scale, q + i0 * W, iW, k, iW, 0.0f, p,
                    keys);
        for (int r = 0; r < rows; ++r) {
          float* pr = p + static_cast<std::int64_t>(r) * keys;
          const std::int64_t visible = i0 + r + 1;
          const float l = row_lse[i0 + r];
          for (std::int64_t j = 0; j < visible; ++j) pr[j] = cpu::fast_exp(pr[j] - l);
          std::fill(pr + visible, pr + keys, 0.0f);
          delta[r] = static_cast<float>(cpu::dot(d_o + (i0 + r) * OW, o + (i0 + r) * OW, Dh));
        }
        // dV[:keys] (keys, Dh) += P^T dO[i0:]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, iDh, rows, 1.0f, p, keys, d_o + i0 * OW, iOW, 1.0f,
                    dv, iW);
        // dP (rows, keys) = dO[i0:] V[:keys]^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, iDh, 1.0f, d_o + i0 * OW, iOW, v, iW, 0.0f, dp,
                    keys);
        // dS = P * (dP - delta), kept in dp
        for (int r = 0; r < rows; ++r) {
          const float* pr = p + static_cast<std::int64_t>(r) * keys;
          float* ds = dp + static_cast<std::int64_t>(r) * keys;
          const float dr = delta[r];
          for (int j = 0; j < keys; ++j) ds[j] = pr[j] * (ds[j] - dr);
        }
        // dQ[i0:] (rows, Dh) = scale * dS K[:keys]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, iDh, keys, scale, dp, keys, k, iW, 0.0f,
                    dq + i0 * W, iW);
        // dK[:keys] (keys, Dh) += scale * dS^T Q[i0:]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, iDh, rows, scale, dp, keys, q + i0 * W, iW, 1.0f, dk,
                    iW);
      }
    }
  }
}

}  // namespace ustrain
