// A float64 reference of attention under a mask, written from the mask's semantics
// (kernels/attention_mask.h) one (query, key) pair at a time: the forward (out, lse) and the
// backward (dq, dk, dv) of a block of query rows against key rows at given absolute positions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace ustrain::test {

// Which key position a query position attends under the mask; `doc` is empty without documents.
struct MaskSemantics {
  bool causal = true;
  std::int64_t window = 0;
  std::function<std::int32_t(std::int64_t b, std::int64_t position)> doc;
  bool allows(std::int64_t b, std::int64_t i, std::int64_t j) const {
    if (causal && j > i) return false;
    if (window > 0 && i - j >= window) return false;
    return !doc || doc(b, i) == doc(b, j);
  }
};

// Row-major (rows, Dh) slices: q of a (b, head), k and v of its kv head, o and d_o of the head.
struct HeadRows {
  std::vector<std::vector<double>> q, k, v, d_o;
};

struct HeadResult {
  std::vector<std::vector<double>> out, dq, dk, dv;
  std::vector<double> lse;
};

// One query head of batch row b: queries at positions q_pos against keys at k_pos. The
// backward is that of sum(out * d_o) with this block's result as the whole result.
inline HeadResult masked_head(const MaskSemantics& m, std::int64_t b, const std::vector<std::int64_t>& q_pos,
                              const std::vector<std::int64_t>& k_pos, const HeadRows& x) {
  const std::size_t nq = q_pos.size(), nk = k_pos.size(), dh = x.q.empty() ? 0 : x.q[0].size();
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  HeadResult r;
  r.out = r.dq = std::vector<std::vector<double>>(nq, std::vector<double>(dh));
  r.dk = r.dv = std::vector<std::vector<double>>(nk, std::vector<double>(dh));
  r.lse.assign(nq, -std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i < nq; ++i) {
    std::vector<double> s(nk), p(nk, 0.0);
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < nk; ++j) {
      if (!m.allows(b, q_pos[i], k_pos[j])) continue;
      for (std::size_t d = 0; d < dh; ++d) s[j] += x.q[i][d] * x.k[j][d] * scale;
      mx = std::max(mx, s[j]);
    }
    if (std::isinf(mx)) continue;  // no key: out 0, lse -inf, no gradient
    double sum = 0;
    for (std::size_t j = 0; j < nk; ++j)
      if (m.allows(b, q_pos[i], k_pos[j])) sum += std::exp(s[j] - mx);
    r.lse[i] = mx + std::log(sum);
    for (std::size_t j = 0; j < nk; ++j)
      if (m.allows(b, q_pos[i], k_pos[j])) p[j] = std::exp(s[j] - r.lse[i]);
    for (std::size_t j = 0; j < nk; ++j)
      for (std::size_t d = 0; d < dh; ++d) r.out[i][d] += p[j] * x.v[j][d];
    double delta = 0;
    for (std::size_t d = 0; d < dh; ++d) delta += x.d_o[i][d] * r.out[i][d];
    for (std::size_t j = 0; j < nk; ++j) {
      if (p[j] == 0.0) continue;
      double dp = 0;
      for (std::size_t d = 0; d < dh; ++d) dp += x.d_o[i][d] * x.v[j][d];
      const double ds = p[j] * (dp - delta) * scale;
      for (std::size_t d = 0; d < dh; ++d) {
        r.dv[j][d] += p[j] * x.d_o[i][d];
        r.dq[i][d] += ds * x.k[j][d];
        r.dk[j][d] += ds * x.q[i][d];
      }
    }
  }
  return r;
}

}  // namespace ustrain::test
