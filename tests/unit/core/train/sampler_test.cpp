// Token sampling (core/tools/sampler.h): greedy, temperature and top-k against softmax.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/model/rng.h"
#include "core/tools/sampler.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double total = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp(logits[i] / temperature);
    total += p[i];
  }
  for (double& x : p) x /= total;
  return p;
}

// Draws n samples and checks each id's frequency against `expected` within 5 standard errors.
void expect_frequencies(const std::vector<float>& logits, const SamplingConfig& config,
                        const std::vector<double>& expected) {
  const int n = 200000;
  std::vector<int> counts(logits.size(), 0);
  Rng rng(31337);
  for (int i = 0; i < n; ++i) {
    const std::int32_t id =
        sample_token(logits.data(), static_cast<std::int64_t>(logits.size()), config, rng.uniform());
    ASSERT_GE(id, 0);
    ASSERT_LT(id, static_cast<std::int32_t>(logits.size()));
    ++counts[static_cast<std::size_t>(id)];
  }
  for (std::size_t id = 0; id < logits.size(); ++id) {
    const double p = expected[id];
    if (p == 0) {
      EXPECT_EQ(counts[id], 0) << "id " << id;
    } else {
      EXPECT_NEAR(double(counts[id]) / n, p, 5 * std::sqrt(p * (1 - p) / n)) << "id " << id;
    }
  }
}

const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f};

TEST(Sampler, GreedyPicksTheArgmaxAndTheLowestIdOnTies) {
  const SamplingConfig greedy{0.0, 0};
  EXPECT_EQ(sample_token(kLogits.data(), 7, greedy, 0.3), 4);
  const std::vector<float> tied = {1.0f, 3.0f, 3.0f, 2.0f};
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(sample_token(tied.data(), 4, greedy, u), 1);
}

TEST(Sampler, TopOneIsGreedyAtAnyTemperature) {
  for (double temperature : {0.1, 1.0, 10.0, 1000.0}) {
    for (double u : {0.0, 0.25, 0.5, 0.999999}) {
      EXPECT_EQ(sample_token(kLogits.data(), 7, SamplingConfig{temperature, 1}, u), 4);
    }
  }
}

TEST(Sampler, WalksTheCumulativeDistributionInIdOrder) {
  // Weights 1 : 2 : 3, so ids change at u = 1/6 and u = 1/2.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f)};
  const SamplingConfig config{1.0, 0};
  EXPECT_EQ(sample_token(logits.data(), 3, config, 0.0), 0);
  EXPECT_EQ(sample_token(logits.data(), 3, config, 1.0 / 6 - 1e-4), 0);
  EXPECT_EQ(sample_token(logits.data(), 3, config, 1.0 / 6 + 1e-4), 1);
  EXPECT_EQ(sample_token(logits.data(), 3, config, 0.5 - 1e-4), 1);
  EXPECT_EQ(sample_token(logits.data(), 3, config, 0.5 + 1e-4), 2);
  EXPECT_EQ(sample_token(logits.data(), 3, config, std::nextafter(1.0, 0.0)), 2);
}

TEST(Sampler, TemperatureOneMatchesSoftmax) {
  expect_frequencies(kLogits, SamplingConfig{1.0, 0}, softmax(kLogits, 1.0));
}

TEST(Sampler, TemperatureScalesTheLogits) {
  expect_frequencies(kLogits, SamplingConfig{0.5, 0}, softmax(kLogits, 0.5));
  expect_frequencies(kLogits, SamplingConfig{3.0, 0}, softmax(kLogits, 3.0));
}

TEST(Sampler, TopKRenormalisesOverTheKLargest) {
  // The three largest logits are ids 4 (3.0), 6 (2.5) and 1 (2.0).
  const std::vector<float> top3 = {2.0f, 2.5f, 3.0f};
  const std::vector<double> p = softmax(top3, 1.0);
  std::vector<double> expected(kLogits.size(), 0.0);
  expected[1] = p[0];
  expected[6] = p[1];
  expected[4] = p[2];
  expect_frequencies(kLogits, SamplingConfig{1.0, 3}, expected);
}

TEST(Sampler, TopKNeverPicksOutsideTheTopK) {
  Rng rng(5);
  std::vector<float> logits(50);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(normal_at(9, i));
  // The 5 largest, found independently of the sampler by comparison counting.
  auto in_top5 = [&](std::int32_t id) {
    int larger = 0;
    for (float l : logits) larger += l > logits[static_cast<std::size_t>(id)];
    return larger < 5;
  };
  for (int i = 0; i < 20000; ++i) {
    const std::int32_t id = sample_token(logits.data(), 50, SamplingConfig{2.0, 5}, rng.uniform());
    ASSERT_TRUE(in_top5(id)) << "picked id " << id;
  }
}

TEST(Sampler, TopKBoundaryTiesGoToLowerIds) {
  const std::vector<float> logits = {5.0f, 1.0f, 5.0f, 5.0f};
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 100; ++i) {
    ++seen[static_cast<std::size_t>(
        sample_token(logits.data(), 4, SamplingConfig{1.0, 2}, (i + 0.5) / 100))];
  }
  EXPECT_EQ(seen[0], 50);
  EXPECT_EQ(seen[1], 0);
  EXPECT_EQ(seen[2], 50);
  EXPECT_EQ(seen[3], 0);
}

TEST(Sampler, HugeLogitsAreStable) {
  // Same distribution as {0, 1, -1}; exp(1000) alone would overflow.
  const std::vector<float> logits = {1000.0f, 1001.0f, 999.0f};
  const std::vector<double> p = softmax({0.0f, 1.0f, -1.0f}, 1.0);
  const SamplingConfig config{1.0, 0};
  EXPECT_EQ(sample_token(logits.data(), 3, config, p[0] - 1e-6), 0);
  EXPECT_EQ(sample_token(logits.data(), 3, config, p[0] + 1e-6), 1);
  EXPECT_EQ(sample_token(logits.data(), 3, config, p[0] + p[1] - 1e-6), 1);
  EXPECT_EQ(sample_token(logits.data(), 3, config, p[0] + p[1] + 1e-6), 2);
}

TEST(Sampler, PaddedVocabularyIdsAreNeverChosen) {
  // A row padded from 5 real tokens to 8, with large values in the padding.
  const std::vector<float> row = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 50.0f, 60.0f, 70.0f};
  Rng rng(3);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_LT(sample_token(row.data(), 5, SamplingConfig{1.0, 0}, rng.uniform()), 5);
  }
  EXPECT_EQ(sample_token(row.data(), 5, SamplingConfig{0.0, 0}, 0.0), 4);
}

TEST(Sampler, RejectsNegativeSettings) {
  EXPECT_THROW(sample_token(kLogits.data(), 7, SamplingConfig{-1.0, 0}, 0.5), UserError);
  EXPECT_THROW(sample_token(kLogits.data(), 7, SamplingConfig{1.0, -2}, 0.5), UserError);
}

}  // namespace
}  // namespace ustrain
