// Mixture-of-experts routing and combine against float64: choices with ties, gates with and
// without renormalisation, softmax and sigmoid scores, the router z-loss, a balancing bias, the
// gradient of the normalised scores (the sequence-level balance loss), and their backwards
// against finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

struct Routed {
  std::vector<std::int32_t> experts;
  std::vector<float> gates, probs, lse;
};

Routed route(CpuBackend& cpu, std::vector<float>& logits, std::int64_t n, std::int64_t e, const MoeRouting& r) {
  Routed out{std::vector<std::int32_t>(static_cast<std::size_t>(n * r.top_k)),
             std::vector<float>(static_cast<std::size_t>(n * r.top_k)), std::vector<float>(static_cast<std::size_t>(n * e)),
             std::vector<float>(static_cast<std::size_t>(n))};
  cpu.moe_route(test::i32(out.experts, Shape{n, r.top_k}), test::f32(out.gates, Shape{n, r.top_k}),
                test::f32(out.probs, Shape{n, e}), test::f32(out.lse, Shape{n}), test::f32(logits, Shape{n, e}), r,
                Tensor());
  return out;
}

// float64: the scores of one row and the gates of the given choice.
std::vector<double> scores_ref(const std::vector<double>& x, bool sigmoid) {
  std::vector<double> p(x.size());
  const double m = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double v : x) sum += std::exp(v - m);
  for (std::size_t i = 0; i < x.size(); ++i) p[i] = sigmoid ? 1 / (1 + std::exp(-x[i])) : std::exp(x[i] - m) / sum;
  return p;
}

TEST(CpuMoe, RoutingPicksTheTopScoresWithTiesToTheLowerExpert) {
  CpuBackend cpu(2);
  // Row 0: experts 1 and 3 tie for first, 0 and 2 tie for third. Row 1: all equal.
  std::vector<float> logits{0.5f, 2.0f, 0.5f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  for (int k : {1, 2, 3, 4}) {
    const Routed r = route(cpu, logits, 2, 4, MoeRouting{k, false, true});
    const std::vector<std::int32_t> row0{1, 3, 0, 2}, row1{0, 1, 2, 3};
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(r.experts[static_cast<std::size_t>(j)], row0[static_cast<std::size_t>(j)]) << "k " << k;
      EXPECT_EQ(r.experts[static_cast<std::size_t>(k + j)], row1[static_cast<std::size_t>(j)]) << "k " << k;
      EXPECT_FLOAT_EQ(r.gates[static_cast<std::size_t>(k + j)], 1.0f / static_cast<float>(k));  // renormalised
    }
  }
}

TEST(CpuMoe, RoutingMatchesFloat64) {
  CpuBackend cpu(2);
  const std::int64_t n = 37, e = 9;
  auto logits = random_floats(static_cast<std::size_t>(n * e), 71, -3.0f, 3.0f);
  for (bool sigmoid : {false, true})
    for (bool renormalize : {false, true})
      for (int k : {1, 2, 9}) {
        SCOPED_TRACE(std::string(sigmoid ? "sigmoid" : "softmax") + (renormalize ? " renormalised" : "") + " k " +
                     std::to_string(k));
        const Routed r = route(cpu, logits, n, e, MoeRouting{k, sigmoid, renormalize});
        for (std::int64_t t = 0; t < n; ++t) {
          const std::vector<double> x(logits.begin() + t * e, logits.begin() + (t + 1) * e);
          const std::vector<double> p = scores_ref(x, sigmoid);
          std::vector<int> order(static_cast<std::size_t>(e));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
          double chosen = 0;
          for (int j = 0; j < k; ++j) chosen += p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
          for (int j = 0; j < k; ++j) {
            const int want = order[static_cast<std::size_t>(j)];
            ASSERT_EQ(r.experts[static_cast<std::size_t>(t * k + j)], want) << "row " << t;
            const double gate = renormalize ? p[static_cast<std::size_t>(want)] / chosen : p[static_cast<std::size_t>(want)];
            EXPECT_NEAR(r.gates[static_cast<std::size_t>(t * k + j)], gate, 1e-6);
          }
          for (std::int64_t i = 0; i < e; ++i) EXPECT_NEAR(r.probs[static_cast<std::size_t>(t * e + i)], p[static_cast<std::size_t>(i)], 1e-6);
          double m = *std::max_element(x.begin(), x.end()), s = 0;
          for (double v : x) s += std::exp(v - m);
          EXPECT_NEAR(r.lse[static_cast<std::size_t>(t)], m + std::log(s), 1e-5);
        }
      }
}

TEST(CpuMoe, RoutingBackwardMatchesFiniteDifferences) {
  // L = sum_j w_j gate_j + z lse^2 for fixed weights w: its gradient through the chosen experts'
  // gates (choices held fixed) and the z-loss.
  CpuBackend cpu(2);
  const std::int64_t n = 5, e = 6;
  auto logits = random_floats(static_cast<std::size_t>(n * e), 81, -2.0f, 2.0f);
  for (bool sigmoid : {false, true})
    for (bool renormalize : {false, true})
      for (int k : {1, 3}) {
        SCOPED_TRACE(std::string(sigmoid ? "sigmoid" : "softmax") + (renormalize ? " renormalised" : "") + " k " +
                     std::to_string(k));
        const MoeRouting routing{k, sigmoid, renormalize};
        Routed r = route(cpu, logits, n, e, routing);
        auto w = random_floats(static_cast<std::size_t>(n * k), 82);
        const float z = 0.3f;
        std::vector<float> dlogits(logits.size());
        cpu.moe_route_backward(test::f32(dlogits, Shape{n, e}), test::f32(w, Shape{n, k}), test::f32(logits, Shape{n, e}),
                               test::f32(r.probs, Shape{n, e}), test::f32(r.lse, Shape{n}),
                               test::i32(r.experts, Shape{n, k}), test::f32(r.gates, Shape{n, k}), routing, z,
                               Tensor());
        const auto loss = [&](const std::vector<double>& x) {
          double l = 0;
          for (std::int64_t t = 0; t < n; ++t) {
            const std::vector<double> row(x.begin() + t * e, x.begin() + (t + 1) * e);
            const std::vector<double> p = scores_ref(row, sigmoid);
            double chosen = 0;
            for (int j = 0; j < k; ++j) chosen += p[static_cast<std::size_t>(r.experts[static_cast<std::size_t>(t * k + j)])];
            for (int j = 0; j < k; ++j) {
              const double pj = p[static_cast<std::size_t>(r.experts[static_cast<std::size_t>(t * k + j)])];
              l += w[static_cast<std::size_t>(t * k + j)] * (renormalize ? pj / chosen : pj);
            }
            const double m = *std::max_element(row.begin(), row.end());
            double s = 0;
            for (double v : row) s += std::exp(v - m);
            l += z * std::pow(m + std::log(s), 2);
          }
          return l;
        };
        EXPECT_LT(test::rel_error(dlogits, test::numeric_gradient(loss, test::to_double(logits))), test::kBackwardTol);
      }
}

TEST(CpuMoe, RoutingBiasChoosesTheExpertsAndLeavesTheGates) {
  CpuBackend cpu(2);
  const std::int64_t n = 29, e = 8;
  auto logits = random_floats(static_cast<std::size_t>(n * e), 75, -2.0f, 2.0f);
  auto bias = random_floats(static_cast<std::size_t>(e), 76, -0.3f, 0.3f);
  for (bool sigmoid : {false, true})
    for (bool renormalize : {false, true})
      for (int k : {1, 3}) {
        SCOPED_TRACE(std::string(sigmoid ? "sigmoid" : "softmax") + (renormalize ? " renormalised" : "") + " k " +
                     std::to_string(k));
        const MoeRouting routing{k, sigmoid, renormalize};
        Routed r{std::vector<std::int32_t>(static_cast<std::size_t>(n * k)), std::vector<float>(static_cast<std::size_t>(n * k)),
                 std::vector<float>(static_cast<std::size_t>(n * e)), std::vector<float>(static_cast<std::size_t>(n))};
        cpu.moe_route(test::i32(r.experts, Shape{n, k}), test::f32(r.gates, Shape{n, k}), test::f32(r.probs, Shape{n, e}),
                      test::f32(r.lse, Shape{n}), test::f32(logits, Shape{n, e}), routing, test::f32(bias, Shape{e}));
        const Routed plain = route(cpu, logits, n, e, routing);
        int moved = 0;
        for (std::int64_t t = 0; t < n; ++t) {
          const float* p = r.probs.data() + t * e;
          std::vector<int> order(static_cast<std::size_t>(e));
          std::iota(order.begin(), order.end(), 0);
          const auto key = [&](int i) { return p[i] + bias[static_cast<std::size_t>(i)]; };
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) > key(b); });
          double chosen = 0;
          for (int j = 0; j < k; ++j) chosen += p[order[static_cast<std::size_t>(j)]];
          for (int j = 0; j < k; ++j) {
            const int want = order[static_cast<std::size_t>(j)];
            ASSERT_EQ(r.experts[static_cast<std::size_t>(t * k + j)], want) << "row " << t;
            EXPECT_NEAR(r.gates[static_cast<std::size_t>(t * k + j)], renormalize ? p[want] / chosen : p[want], 1e-6);
            moved += r.experts[static_cast<std::size_t>(t * k + j)] != plain.experts[static_cast<std::size_t>(t * k + j)];
          }
        }
        EXPECT_GT(moved, 0) << "the bias changed no choice";
        EXPECT_EQ(r.probs, plain.probs);
      }
}

TEST(CpuMoe, RoutingBackwardOfTheNormalisedScoresMatchesFiniteDifferences) {
  // L = sum_j w_j gate_j + sum_t sum_i c_{b(t), i} s_{i,t} / sum_m s_{m,t} for fixed w and c,
  // token t in sequence b(t): the gates' gradient plus a sequence gradient c of the
  // normalised scores.
  CpuBackend cpu(2);
  const std::int64_t seqs = 2, len = 3, n = seqs * len, e = 5;
  auto logits = random_floats(static_cast<std::size_t>(n * e), 85, -2.0f, 2.0f);
  auto c = random_floats(static_cast<std::size_t>(seqs * e), 86);
  for (bool sigmoid : {false, true})
    for (bool renormalize : {false, true}) {
      SCOPED_TRACE(std::string(sigmoid ? "sigmoid" : "softmax") + (renormalize ? " renormalised" : ""));
      const int k = 2;
      const MoeRouting routing{k, sigmoid, renormalize};
      Routed r = route(cpu, logits, n, e, routing);
      auto w = random_floats(static_cast<std::size_t>(n * k), 87);
      std::vector<float> dlogits(logits.size());
      cpu.moe_route_backward(test::f32(dlogits, Shape{n, e}), test::f32(w, Shape{n, k}), test::f32(logits, Shape{n, e}),
                             test::f32(r.probs, Shape{n, e}), test::f32(r.lse, Shape{n}), test::i32(r.experts, Shape{n, k}),
                             test::f32(r.gates, Shape{n, k}), routing, 0.0f, test::f32(c, Shape{seqs, e}));
      const auto loss = [&](const std::vector<double>& x) {
        double l = 0;
        for (std::int64_t t = 0; t < n; ++t) {
          const std::vector<double> p = scores_ref(std::vector<double>(x.begin() + t * e, x.begin() + (t + 1) * e), sigmoid);
          double chosen = 0, total = 0;
          for (int j = 0; j < k; ++j) chosen += p[static_cast<std::size_t>(r.experts[static_cast<std::size_t>(t * k + j)])];
          for (double v : p) total += v;
          for (int j = 0; j < k; ++j) {
            const double pj = p[static_cast<std::size_t>(r.experts[static_cast<std::size_t>(t * k + j)])];
            l += w[static_cast<std::size_t>(t * k + j)] * (renormalize ? pj / chosen : pj);
          }
          for (std::int64_t i = 0; i < e; ++i)
            l += c[static_cast<std::size_t>((t / len) * e + i)] * p[static_cast<std::size_t>(i)] / total;
        }
        return l;
      };
      EXPECT_LT(test::rel_error(dlogits, test::numeric_gradient(loss, test::to_double(logits))), test::kBackwardTol);
    }
}

TEST(CpuMoe, CombineAndItsBackwardMatchFloat64) {
  CpuBackend cpu(2);
  const std::int64_t n = 7, k = 3, d = 5;
  auto rows = random_floats(static_cast<std::size_t>(n * k * d), 91);
  auto gates = random_floats(static_cast<std::size_t>(n * k), 92, 0.0f, 1.0f);
  auto dout = random_floats(static_cast<std::size_t>(n * d), 93);
  std::vector<float> out(static_cast<std::size_t>(n * d), 9.0f), drows(rows.size(), 9.0f), dgates(gates.size(), 9.0f);
  cpu.moe_combine(test::f32(out, Shape{n, d}), test::f32(rows, Shape{n * k, d}), test::f32(gates, Shape{n, k}));
  cpu.moe_combine_backward(test::f32(drows, Shape{n * k, d}), test::f32(dgates, Shape{n, k}), test::f32(dout, Shape{n, d}),
                           test::f32(rows, Shape{n * k, d}), test::f32(gates, Shape{n, k}));
  std::vector<double> want(out.size(), 0.0), want_drows(rows.size()), want_dgates(gates.size(), 0.0);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < k; ++j)
      for (std::int64_t c = 0; c < d; ++c) {
        const auto tj = static_cast<std::size_t>(t * k + j), row = static_cast<std::size_t>((t * k + j) * d + c);
        want[static_cast<std::size_t>(t * d + c)] += double{gates[tj]} * rows[row];
        want_drows[row] = double{gates[tj]} * dout[static_cast<std::size_t>(t * d + c)];
        want_dgates[tj] += double{dout[static_cast<std::size_t>(t * d + c)]} * rows[row];
      }
  EXPECT_LT(test::rel_error(out, want), test::kForwardTol);
  EXPECT_LT(test::rel_error(drows, want_drows), test::kForwardTol);
  EXPECT_LT(test::rel_error(dgates, want_dgates), test::kForwardTol);
}

}  // namespace
}  // namespace ustrain
