// Helpers for the op tests: random inputs, float64 references, error norms, and central
// finite differences of a float64 reference loss.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/tensor.h"

namespace ustrain::test {

// Relative error norms for float32 results against float64 references.
constexpr double kForwardTol = 1e-5;
constexpr double kBackwardTol = 1e-5;

// Uniform in [lo, hi); with a continuous distribution no value is exactly zero in practice.
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<std::int32_t> random_ids(std::size_t n, std::int32_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, vocab - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

inline Tensor f32(std::vector<float>& v, Shape s) {
  EXPECT_EQ(static_cast<std::int64_t>(v.size()), s.numel());
  return Tensor(v.data(), s, DType::f32);
}

inline Tensor i32(std::vector<std::int32_t>& v, Shape s) {
  EXPECT_EQ(static_cast<std::int64_t>(v.size()), s.numel());
  return Tensor(v.data(), s, DType::i32);
}

// ||got - want|| / ||want|| (2-norms).
template <class Got>
double rel_error(const std::vector<Got>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += want[i] * want[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

inline double weighted_sum(const std::vector<double>& out, const std::vector<double>& weights) {
  double s = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * weights[i];
  return s;
}

// d loss / d x by central differences; loss is a float64 function of x.
inline std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& loss,
                                            std::vector<double> x, double step = 1e-6) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    const double h = step * std::max(1.0, std::abs(saved));
    x[i] = saved + h;
    const double up = loss(x);
    x[i] = saved - h;
    const double down = loss(x);
    x[i] = saved;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace ustrain::test
