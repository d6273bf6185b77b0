// Helpers of the GPU attention tests (gpu_attention_blocks_test.cpp, gpu_masked_attention_test.cpp):
// parts of (B, S, width) tensors, differences, and lse compared with -inf where rows saw no key.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Rows [begin, begin + count) and columns [col, col + cols) of every batch row of a
// (B, S, width) tensor, in order.
inline std::vector<float> part(const std::vector<float>& t, std::int64_t batch, std::int64_t seq, std::int64_t width,
                               SeqRange rows, std::int64_t col, std::int64_t cols) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t r = rows.begin; r < rows.begin + rows.count; ++r) {
      const auto at = t.begin() + (b * seq + r) * width + col;
      out.insert(out.end(), at, at + cols);
    }
  return out;
}

// The rows of a (B, S, width) tensor outside [begin, begin + count).
inline std::vector<float> outside(const std::vector<float>& t, std::int64_t batch, std::int64_t seq, std::int64_t width,
                                  SeqRange rows) {
  std::vector<float> out = part(t, batch, seq, width, {0, rows.begin}, 0, width);
  const std::int64_t end = rows.begin + rows.count;
  const std::vector<float> tail = part(t, batch, seq, width, {end, seq - end}, 0, width);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

inline std::vector<float> minus(std::vector<float> a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
  return a;
}

// lse values: -inf exactly where the reference has -inf (rows that saw no key), the others
// norm-wise to the fp32 bound.
inline void expect_lse_close(std::vector<float> got, std::vector<float> want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i] == kNegInf, want[i] == kNegInf) << what << ": lse " << got[i] << " for " << want[i] << " at " << i;
    if (want[i] == kNegInf) got[i] = want[i] = 0.0f;
  }
  expect_close(got, want, fp32_tolerance(Measure::norm_rel), what);
}

}  // namespace ustrain::gpu_test
