// Mixture-of-experts routing and the gate-weighted combine of the experts' outputs. Every row
// is independent: OpenMP over rows, each row's sums in a fixed order.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace ustrain {
namespace {

struct RouteShape {
  std::int64_t rows, experts, k;
};

RouteShape route_shape(const Tensor& experts, const Tensor& gates, const Tensor& probs, const Tensor& lse,
                       const Tensor& logits, const MoeRouting& r) {
  USTRAIN_ASSERT(logits.shape.rank() == 2, "router logits must be (N, E), got " + logits.shape.str());
  const RouteShape s{logits.shape[0], logits.shape[1], r.top_k};
  USTRAIN_ASSERT(s.k >= 1 && s.k <= s.experts, "top-" + std::to_string(s.k) + " of " + std::to_string(s.experts) +
                                                   " experts");
  USTRAIN_ASSERT(experts.numel() == s.rows * s.k && gates.numel() == s.rows * s.k && probs.numel() == s.rows * s.experts &&
                     lse.numel() == s.rows,
                 "routing of logits " + logits.shape.str() + " into experts " + experts.shape.str() + ", gates " +
                     gates.shape.str() + ", probs " + probs.shape.str() + ", lse " + lse.shape.str());
  return s;
}

}  // namespace

void CpuBackend::moe_route(Tensor experts, Tensor gates, Tensor probs, Tensor lse, Tensor logits,
                           const MoeRouting& routing, Tensor bias) {
  const RouteShape s = route_shape(experts, gates, probs, lse, logits, routing);
  const std::int64_t E = s.experts, k = s.k;
  USTRAIN_ASSERT(bias.empty() || (bias.dtype == DType::f32 && bias.numel() == E),
                 "router bias " + bias.shape.str() + " for " + std::to_string(E) + " experts");
  const float* b = bias.empty() ? nullptr : bias.f32();  // (E)
#pragma omp parallel for schedule(static) num_threads(threads_) if (s.rows > 64)
  for (std::int64_t t = 0; t < s.rows; ++t) {
    const float* x = logits.f32() + t * E;  // (E)
    float* p = probs.f32() + t * E;         // (E)
    const float m = *std::max_element(x, x + E);
    double sum = 0;
    for (std::int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(x[e]) - m);
    lse.f32()[t] = static_cast<float>(m + std::log(sum));
    for (std::int64_t e = 0; e < E; ++e)
      p[e] = routing.sigmoid ? static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x[e]))))
                             : static_cast<float>(std::exp(static_cast<double>(x[e]) - m) / sum);
    // The selection keys: the probs, plus the bias where balancing adds one (fp32 sums).
    std::vector<float> key(p, p + E);
    if (b != nullptr)
      for (std::int64_t e = 0; e < E; ++e) key[static_cast<std::size_t>(e)] = p[e] + b[e];
    const float* q = key.data();
    // The k highest keys, highest first; equal keys in expert order (a stable sort).
    std::vector<std::int32_t> idx(static_cast<std::size_t>(E));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [q](std::int32_t a, std::int32_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); });
    double chosen = 0;
    for (std::int64_t j = 0; j < k; ++j) chosen += p[idx[static_cast<std::size_t>(j)]];
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int32_t e = idx[static_cast<std::size_t>(j)];
      experts.i32()[t * k + j] = e;
      gates.f32()[t * k + j] = routing.renormalize ? static_cast<float>(p[e] / chosen) : p[e];
    }
  }
}

void CpuBackend::moe_route_backward(Tensor dlogits, Tensor dgates, Tensor logits, Tensor probs, Tensor lse,
                                    Tensor experts, Tensor gates, const MoeRouting& routing, float z_grad,
                                    Tensor seq_grad) {
  const RouteShape s = route_shape(experts, gates, probs, lse, logits, routing);
  const std::int64_t E = s.experts, k = s.k;
  USTRAIN_ASSERT(dlogits.shape == logits.shape && dgates.numel() == s.rows * k,
                 "router backward: dlogits " + dlogits.shape.str() + ", dgates " + dgates.shape.str());
  const std::int64_t seqs = seq_grad.empty() ? 0 : seq_grad.shape.rows();
  USTRAIN_ASSERT(seq_grad.empty() || (seq_grad.dtype == DType::f32 && seqs > 0 && seq_grad.numel() == seqs * E &&
                                      s.rows % seqs == 0),
                 "router backward: seq_grad " + seq_grad.shape.str() + " for " + std::to_string(s.rows) +
                     " tokens of " + std::to_string(E) + " experts");
  const std::int64_t seq_len = seqs > 0 ? s.rows / seqs : 0;
#pragma omp parallel for schedule(static) num_threads(threads_) if (s.rows > 64)
  for (std::int64_t t = 0; t < s.rows; ++t) {
    const float* p = probs.f32() + t * E;
    const float* g = gates.f32() + t * k;
    const float* dg = dgates.f32() + t * k;
    const std::int32_t* chosen = experts.i32() + t * k;
    float* dl = dlogits.f32() + t * E;
    // d probs: only the chosen experts' scores reach the gates. With renormalisation
    // g_j = p_j / S: dp_j = (dg_j - sum_m dg_m g_m) / S.
    std::fill(dl, dl + E, 0.0f);
    double scale = 1, shift = 0;
    if (routing.renormalize) {
      double sum = 0;
      for (std::int64_t j = 0; j < k; ++j) sum += p[chosen[j]];
      scale = 1.0 / sum;
      for (std::int64_t j = 0; j < k; ++j) shift += static_cast<double>(dg[j]) * g[j];
    }
    for (std::int64_t j = 0; j < k; ++j) dl[chosen[j]] = static_cast<float>((dg[j] - shift) * scale);  // dp
    if (seqs > 0) {  // the sequence's gradient c of the normalised scores p_e / P, P = sum_m p_m
      const float* c = seq_grad.f32() + (t / seq_len) * E;  // (E)
      if (routing.sigmoid) {  // dp_e += (c_e - sum_m c_m p_m / P) / P
        double total = 0, dot = 0;
        for (std::int64_t e = 0; e < E; ++e) {
          total += p[e];
          dot += static_cast<double>(c[e]) * p[e];
        }
        const double mean = dot / total;
        for (std::int64_t e = 0; e < E; ++e) dl[e] = static_cast<float>(dl[e] + (c[e] - mean) / total);
      } else {  // softmax scores sum to 1 already
        for (std::int64_t e = 0; e < E; ++e) dl[e] = static_cast<float>(static_cast<double>(dl[e]) + c[e]);
      }
    }
    // Through the score function, in place: softmax dl_e = p_e (dp_e - sum_m dp_m p_m);
    // sigmoid dl_e = dp_e p_e (1 - p_e).
    if (routing.sigmoid) {
      for (std::int64_t e = 0; e < E; ++e) dl[e] = static_cast<float>(static_cast<double>(dl[e]) * p[e] * (1.0 - p[e]));
    } else {
      double dot = 0;
      for (std::int64_t e = 0; e < E; ++e) dot += static_cast<double>(dl[e]) * p[e];
      for (std::int64_t e = 0; e < E; ++e) dl[e] = static_cast<float>(p[e] * (dl[e] - dot));
    }
    if (z_grad != 0.0f) {  // d(z lse^2) / dlogit_e = 2 z lse softmax_e
      const double l = lse.f32()[t];
      for (std::int64_t e = 0; e < E; ++e)
        dl[e] += static_cast<float>(2.0 * z_grad * l * std::exp(static_cast<double>(logits.f32()[t * E + e]) - l));
    }
  }
}

void CpuBackend::moe_combine(Tensor out, Tensor rows, Tensor gates) {
  const std::int64_t N = out.shape.rows(), D = out.shape.last(), k = N == 0 ? 0 : gates.numel() / N;
  USTRAIN_ASSERT(gates.numel() == N * k && rows.numel() == N * k * D && rows.shape.last() == D,
                 "combine of rows " + rows.shape.str() + " with gates " + gates.shape.str() + " into " + out.shape.str());
#pragma omp parallel for schedule(static) num_threads(threads_) if (N > 16)
  for (std::int64_t t = 0; t < N; ++t) {
    float* o = out.f32() + t * D;
    std::fill(o, o + D, 0.0f);
    for (std::int64_t j = 0; j < k; ++j) {
      const float g = gates.f32()[t * k + j];
      const float* r = rows.f32() + (t * k + j) * D;
      for (std::int64_t d = 0; d < D; ++d) o[d] += g * r[d];
    }
  }
}

void CpuBackend::moe_combine_backward(Tensor drows, Tensor dgates, Tensor dout, Tensor rows, Tensor gates) {
  const std::int64_t N = dout.shape.rows(), D = dout.shape.last(), k = N == 0 ? 0 : gates.numel() / N;
  USTRAIN_ASSERT(gates.numel() == N * k && rows.numel() == N * k * D && drows.numel() == rows.numel() &&
                     dgates.numel() == N * k,
                 "combine backward of rows " + rows.shape.str() + " with gates " + gates.shape.str());
#pragma omp parallel for schedule(static) num_threads(threads_) if (N > 16)
  for (std::int64_t t = 0; t < N; ++t) {
    const float* dy = dout.f32() + t * D;
    for (std::int64_t j = 0; j < k; ++j) {
      const float g = gates.f32()[t * k + j];
      const float* r = rows.f32() + (t * k + j) * D;
      float* dr = drows.f32() + (t * k + j) * D;
      double dot = 0;
      for (std::int64_t d = 0; d < D; ++d) {
        dr[d] = g * dy[d];
        dot += static_cast<double>(dy[d]) * r[d];
      }
      dgates.f32()[t * k + j] = static_cast<float>(dot);
    }
  }
}

}  // namespace ustrain
