// Balancing a mixture of experts: the sequence-level balance loss's value and gradient against
// a float64 reference with finite differences (softmax and sigmoid scores), its split over
// context-parallel ranks, and the update rule of auxiliary-loss-free balancing's bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/model/sequence_balance.h"
#include "core/step/router_balance.h"
#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

constexpr std::int64_t kSeqs = 3, kLen = 7, kTokens = kSeqs * kLen, kExperts = 5, kTopK = 2;

struct Routing {
  std::vector<std::int32_t> experts;
  std::vector<float> gates, probs, lse;
};

Routing route(CpuBackend& cpu, std::vector<float>& logits, const MoeRouting& r) {
  const std::int64_t n = static_cast<std::int64_t>(logits.size()) / kExperts;
  Routing out{std::vector<std::int32_t>(static_cast<std::size_t>(n * r.top_k)),
              std::vector<float>(static_cast<std::size_t>(n * r.top_k)),
              std::vector<float>(static_cast<std::size_t>(n * kExperts)), std::vector<float>(static_cast<std::size_t>(n))};
  cpu.moe_route(test::i32(out.experts, Shape{n, r.top_k}), test::f32(out.gates, Shape{n, r.top_k}),
                test::f32(out.probs, Shape{n, kExperts}), test::f32(out.lse, Shape{n}),
                test::f32(logits, Shape{n, kExperts}), r, Tensor());
  return out;
}

// float64: token t's scores normalised over the experts.
std::vector<double> normalised_scores(const double* x, bool sigmoid) {
  std::vector<double> s(static_cast<std::size_t>(kExperts));
  const double m = *std::max_element(x, x + kExperts);
  for (std::int64_t i = 0; i < kExperts; ++i) s[static_cast<std::size_t>(i)] = sigmoid ? 1 / (1 + std::exp(-x[i])) : std::exp(x[i] - m);
  double total = 0;
  for (double v : s) total += v;
  for (double& v : s) v /= total;
  return s;
}

// float64: the mean over the sequences of alpha sum_i f_i P_i for fixed choices.
double reference_loss(const std::vector<double>& x, const std::vector<std::int32_t>& chosen, bool sigmoid, double alpha) {
  double loss = 0;
  for (std::int64_t b = 0; b < kSeqs; ++b) {
    std::vector<double> f(static_cast<std::size_t>(kExperts), 0.0), P(static_cast<std::size_t>(kExperts), 0.0);
    for (std::int64_t t = b * kLen; t < (b + 1) * kLen; ++t) {
      for (std::int64_t j = 0; j < kTopK; ++j)
        f[static_cast<std::size_t>(chosen[static_cast<std::size_t>(t * kTopK + j)])] +=
            static_cast<double>(kExperts) / (kTopK * kLen);
      const std::vector<double> s = normalised_scores(x.data() + t * kExperts, sigmoid);
      for (std::int64_t i = 0; i < kExperts; ++i) P[static_cast<std::size_t>(i)] += s[static_cast<std::size_t>(i)] / kLen;
    }
    for (std::int64_t i = 0; i < kExperts; ++i) loss += alpha * f[static_cast<std::size_t>(i)] * P[static_cast<std::size_t>(i)];
  }
  return loss / kSeqs;
}

TEST(SequenceBalance, CountsEachSequencesChoices) {
  const std::vector<std::int32_t> chosen{0, 1, 1, 2, /* sequence 1 */ 3, 3, 0, 3};  // 2 sequences of 2 tokens, top-2
  const std::vector<float> counts = sequence_choices(chosen, 2, 4, 2);
  EXPECT_EQ(counts, (std::vector<float>{1, 2, 1, 0, 1, 0, 0, 3}));
}

TEST(SequenceBalance, ValueAndGradientMatchFloat64) {
  CpuBackend cpu(2);
  const double alpha = 0.3;
  for (bool sigmoid : {false, true}) {
    SCOPED_TRACE(sigmoid ? "sigmoid" : "softmax");
    auto logits = test::random_floats(static_cast<std::size_t>(kTokens * kExperts), 51, -2.0f, 2.0f);
    const MoeRouting routing{static_cast<int>(kTopK), sigmoid, true};
    Routing r = route(cpu, logits, routing);
    const std::vector<float> choices = sequence_choices(r.experts, kSeqs, kExperts, kTopK);
    // dL/d(each token's loss) of the mean over the batch's tokens.
    const double loss_grad = 1.0 / static_cast<double>(kTokens);
    SequenceBalance balance = sequence_balance(choices, r.probs, kSeqs, kExperts, kTopK, sigmoid, alpha, loss_grad);
    const double want = reference_loss(test::to_double(logits), r.experts, sigmoid, alpha);
    EXPECT_NEAR(balance.value / kSeqs, want, 1e-6 * want);

    // The gradient into the logits through the router's backward, the gates' share zero.
    std::vector<float> dgates(r.gates.size(), 0.0f), dlogits(logits.size());
    cpu.moe_route_backward(test::f32(dlogits, Shape{kTokens, kExperts}), test::f32(dgates, Shape{kTokens, kTopK}),
                           test::f32(logits, Shape{kTokens, kExperts}), test::f32(r.probs, Shape{kTokens, kExperts}),
                           test::f32(r.lse, Shape{kTokens}), test::i32(r.experts, Shape{kTokens, kTopK}),
                           test::f32(r.gates, Shape{kTokens, kTopK}), routing, 0.0f,
                           test::f32(balance.score_grad, Shape{kSeqs, kExperts}));
    const auto loss = [&](const std::vector<double>& x) { return reference_loss(x, r.experts, sigmoid, alpha); };
    EXPECT_LT(test::rel_error(dlogits, test::numeric_gradient(loss, test::to_double(logits))), test::kBackwardTol);
  }
}

// Under context parallelism each rank holds part of every sequence: with the choices summed
// over the ranks, the ranks' values add up to the whole's and their gradients are the whole's.
TEST(SequenceBalance, ContextParallelSharesAddUp) {
  CpuBackend cpu(2);
  auto logits = test::random_floats(static_cast<std::size_t>(kTokens * kExperts), 52, -2.0f, 2.0f);
  const MoeRouting routing{static_cast<int>(kTopK), true, true};
  const Routing r = [&] { return route(cpu, logits, routing); }();
  const SequenceBalance whole = sequence_balance(sequence_choices(r.experts, kSeqs, kExperts, kTopK), r.probs, kSeqs,
                                                 kExperts, kTopK, true, 0.5, 0.01);
  // Rank 0 holds the first 3 tokens of every sequence, rank 1 the other 4.
  std::vector<std::int32_t> experts[2];
  std::vector<float> probs[2];
  for (std::int64_t t = 0; t < kTokens; ++t) {
    const int rank = t % kLen < 3 ? 0 : 1;
    experts[rank].insert(experts[rank].end(), r.experts.begin() + t * kTopK, r.experts.begin() + (t + 1) * kTopK);
    probs[rank].insert(probs[rank].end(), r.probs.begin() + t * kExperts, r.probs.begin() + (t + 1) * kExperts);
  }
  std::vector<float> summed = sequence_choices(experts[0], kSeqs, kExperts, kTopK);
  const std::vector<float> other = sequence_choices(experts[1], kSeqs, kExperts, kTopK);
  for (std::size_t i = 0; i < summed.size(); ++i) summed[i] += other[i];
  double value = 0;
  for (int rank : {0, 1}) {
    const SequenceBalance part = sequence_balance(summed, probs[rank], kSeqs, kExperts, kTopK, true, 0.5, 0.01);
    EXPECT_EQ(part.score_grad, whole.score_grad) << "rank " << rank;
    value += part.value;
  }
  EXPECT_NEAR(value, whole.value, 1e-12 * whole.value);
}

TEST(RouterBias, MovesTowardsTheMeanLoad) {
  std::vector<float> bias{0.0f, 0.5f, -0.25f, 0.125f};
  const std::vector<double> load{1, 5, 3, 3};  // mean 3
  step_router_bias(bias, load, 0.125);
  EXPECT_EQ(bias, (std::vector<float>{0.125f, 0.375f, -0.25f, 0.125f}));
  // Balanced: nothing moves.
  step_router_bias(bias, std::vector<double>{2, 2, 2, 2}, 0.125);
  EXPECT_EQ(bias, (std::vector<float>{0.125f, 0.375f, -0.25f, 0.125f}));
}

}  // namespace
}  // namespace ustrain
