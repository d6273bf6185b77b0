// What the expert dispatcher's multi-rank tests share: every rank's rows and routing made
// from a seed, linear experts (whole, or split over a tp group like the MoE layer's), the
// dispatcher's planned buffers, and the references a rank checks its results against.
// Values are multiples of 1/8 in [-1, 1], so every product and sum is exact in fp32.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "parallel/expert_dispatch.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain::dispatch_test {

using mpi_test::mix;

constexpr int kExperts = 12;  // splits over 1, 2, 3, 4 and 6 ranks
constexpr std::int64_t kWidth = 7;

inline float eighth(std::uint64_t h) { return static_cast<float>(static_cast<std::int64_t>(h % 17) - 8) / 8.0f; }

// Where the rows go.
enum class Routing {
  spread,         // any expert
  some_empty,     // only every third expert: the others get no row anywhere
  one_member,     // only the first member's experts: everything goes to one rank
  silent_member,  // spread, but member 1 routes no row at all
  silent,         // no member routes a row: no round runs
};

// One member's rows in expert order, as the MoE layer hands them over.
struct Rows {
  std::vector<std::int64_t> counts;  // (E)
  std::vector<std::int32_t> expert;  // (n) the expert of each row
  std::vector<float> x, d_out;       // (n, D)
  std::int64_t n() const { return static_cast<std::int64_t>(expert.size()); }
};

inline Rows rows_of(int member, int members, Routing routing, std::uint64_t seed) {
  Rows r;
  r.counts.assign(kExperts, 0);
  std::int64_t n = 9 + 5 * member;
  if ((routing == Routing::silent_member && member == 1) || routing == Routing::silent) n = 0;
  std::vector<std::int32_t> chosen;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto m = static_cast<std::uint64_t>(member), at = static_cast<std::uint64_t>(i);
    const std::uint64_t h = mix(seed * 7919u + m * 104729u + at);
    int e = static_cast<int>(h % kExperts);
    if (routing == Routing::some_empty) e = 3 * static_cast<int>(h % (kExperts / 3));
    if (routing == Routing::one_member) e = static_cast<int>(h % static_cast<std::uint64_t>(kExperts / members));
    chosen.push_back(e);
    ++r.counts[static_cast<std::size_t>(e)];
  }
  for (int e = 0; e < kExperts; ++e)  // expert order
    for (std::int32_t c : chosen)
      if (c == e) r.expert.push_back(e);
  const auto m = static_cast<std::uint64_t>(member);
  for (std::int64_t i = 0; i < n * kWidth; ++i) {
    const auto at = static_cast<std::uint64_t>(i);
    r.x.push_back(eighth(mix(seed + 11u * m + 1000003u * at)));
    r.d_out.push_back(eighth(mix(seed + 13u * m + 999983u * at + 5)));
  }
  return r;
}

inline std::vector<float> weights(std::uint64_t seed) {  // (E, D, D)
  std::vector<float> w(static_cast<std::size_t>(kExperts * kWidth * kWidth));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = eighth(mix(seed * 31u + i + 77));
  return w;
}

// Linear experts; only the owner may run one.
class LinearExperts final : public ExpertCompute {
 public:
  LinearExperts(std::vector<float> w, ExpertPlacement placement)
      : w_(std::move(w)), dw_(w_.size(), 0.0f), placement_(placement) {}
  void forward(Backend& be, int e, Tensor out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    be.linear_forward(out, in, weight(w_, e));
  }
  void backward(Backend& be, int e, Tensor d_in, Tensor d_out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    be.linear_backward_input(d_in, d_out, weight(w_, e));
    be.linear_backward_weight(weight(dw_, e), d_out, in);
  }
  const std::vector<float>& grads() const { return dw_; }

 private:
  static Tensor weight(std::vector<float>& v, int e) {
    return Tensor(v.data() + static_cast<std::size_t>(e * kWidth * kWidth), Shape{kWidth, kWidth});
  }
  std::vector<float> w_, dw_;
  ExpertPlacement placement_;
};

// The same experts split over a tp group like the MoE layer's: tp rank t holds the input
// columns [t D / tp, (t + 1) D / tp) of every expert's weights (a row-parallel linear), so its
// outputs are partial sums over tp and its input gradients are zero outside its columns.
class ShardedLinearExperts final : public ExpertCompute {
 public:
  ShardedLinearExperts(std::vector<float> w, ExpertPlacement placement, int tp, int tp_rank)
      : w_(std::move(w)),
        dw_(w_.size(), 0.0f),
        placement_(placement),
        first_(kWidth * tp_rank / tp),
        end_(kWidth * (tp_rank + 1) / tp) {}
  void forward(Backend&, int e, Tensor out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    const float* x = in.f32();
    float* y = out.f32();
    for (std::int64_t i = 0; i < in.shape[0]; ++i)
      for (std::int64_t o = 0; o < kWidth; ++o) {
        float sum = 0;
        for (std::int64_t j = first_; j < end_; ++j) sum += x[i * kWidth + j] * w(e, o, j);
        y[i * kWidth + o] = sum;
      }
  }
  void backward(Backend&, int e, Tensor d_in, Tensor d_out, Tensor in) override {
    EXPECT_TRUE(placement_.owns(e)) << "expert " << e << " ran on member " << placement_.member;
    const float *x = in.f32(), *dy = d_out.f32();
    float* dx = d_in.f32();
    for (std::int64_t i = 0; i < in.shape[0]; ++i)
      for (std::int64_t j = 0; j < kWidth; ++j) {
        float sum = 0;
        if (j >= first_ && j < end_)
          for (std::int64_t o = 0; o < kWidth; ++o) sum += dy[i * kWidth + o] * w(e, o, j);
        dx[i * kWidth + j] = sum;
      }
    for (std::int64_t o = 0; o < kWidth; ++o)
      for (std::int64_t j = first_; j < end_; ++j) {
        float sum = 0;
        for (std::int64_t i = 0; i < in.shape[0]; ++i) sum += dy[i * kWidth + o] * x[i * kWidth + j];
        dw_[index(e, o, j)] += sum;
      }
  }
  const std::vector<float>& grads() const { return dw_; }
  bool holds(std::int64_t column) const { return column >= first_ && column < end_; }

 private:
  static std::size_t index(int e, std::int64_t o, std::int64_t j) {
    return static_cast<std::size_t>((e * kWidth + o) * kWidth + j);
  }
  float w(int e, std::int64_t o, std::int64_t j) const { return w_[index(e, o, j)]; }
  std::vector<float> w_, dw_;
  ExpertPlacement placement_;
  std::int64_t first_, end_;
};

// The dispatcher's planned buffers, sized like the trainer's plan sizes them.
struct Buffers {
  Buffers(std::int64_t send_rows, std::int64_t capacity, std::int64_t gathered_rows = 0)
      : send(static_cast<std::size_t>(send_rows * kWidth)),
        recv(static_cast<std::size_t>(capacity * kWidth)),
        recv_grad(recv.size()),
        result(recv.size()),
        gathered(static_cast<std::size_t>(gathered_rows * kWidth)) {}
  DispatchBuffers tensors(std::int64_t send_rows, std::int64_t capacity) {
    return {Tensor(send.data(), Shape{send_rows, kWidth}), Tensor(recv.data(), Shape{capacity, kWidth}),
            Tensor(recv_grad.data(), Shape{capacity, kWidth}), Tensor(result.data(), Shape{capacity, kWidth}),
            Tensor(gathered.data(), Shape{static_cast<std::int64_t>(gathered.size()) / kWidth, kWidth})};
  }
  std::vector<float> send, recv, recv_grad, result, gathered;
};

// Rows member `s` routes to member `d` (all of `all`'s counts of d's experts).
inline std::int64_t routed(const std::vector<Rows>& all, const ExpertPlacement& pl, int s, int d) {
  std::int64_t n = 0;
  for (int e = d * pl.per_member(); e < (d + 1) * pl.per_member(); ++e)
    n += all[static_cast<std::size_t>(s)].counts[static_cast<std::size_t>(e)];
  return n;
}

// Whether row i of a (rows, kWidth) result is all zeros.
inline bool zero_row(const std::vector<float>& values, std::int64_t i) {
  const auto row = values.begin() + i * kWidth;
  return std::all_of(row, row + kWidth, [](float v) { return v == 0.0f; });
}

// Each row's output and input gradient, summed over the tp group, equal one expert's
// (kWidth, kWidth) product computed here.
inline void expect_reference_results(const Rows& mine, const std::vector<float>& w, const std::vector<float>& out,
                              const std::vector<float>& d_in) {
  for (std::int64_t i = 0; i < mine.n(); ++i) {
    const std::size_t e = static_cast<std::size_t>(mine.expert[static_cast<std::size_t>(i)]);
    for (std::int64_t o = 0; o < kWidth; ++o) {
      float y = 0, g = 0;
      for (std::int64_t j = 0; j < kWidth; ++j) {
        y += mine.x[static_cast<std::size_t>(i * kWidth + j)] * w[(e * kWidth + o) * kWidth + j];
        g += mine.d_out[static_cast<std::size_t>(i * kWidth + j)] * w[(e * kWidth + j) * kWidth + o];
      }
      ASSERT_EQ(out[static_cast<std::size_t>(i * kWidth + o)], y) << "row " << i << " output " << o;
      ASSERT_EQ(d_in[static_cast<std::size_t>(i * kWidth + o)], g) << "row " << i << " input gradient " << o;
    }
  }
}

// The weight gradients this rank's experts should hold: every member's rows of an owned
// expert, in the columns this rank holds.
inline std::vector<float> owned_weight_grads(const std::vector<Rows>& all, const ExpertPlacement& pl, std::size_t size,
                                      const std::function<bool(std::int64_t)>& holds_column) {
  std::vector<float> dw(size, 0.0f);
  for (const Rows& r : all)
    for (std::int64_t i = 0; i < r.n(); ++i) {
      const std::size_t e = static_cast<std::size_t>(r.expert[static_cast<std::size_t>(i)]);
      if (!pl.owns(static_cast<int>(e))) continue;
      for (std::int64_t o = 0; o < kWidth; ++o)
        for (std::int64_t j = 0; j < kWidth; ++j)
          if (holds_column(j))
            dw[(e * kWidth + o) * kWidth + j] +=
                r.d_out[static_cast<std::size_t>(i * kWidth + o)] * r.x[static_cast<std::size_t>(i * kWidth + j)];
    }
  return dw;
}

}  // namespace ustrain::dispatch_test
