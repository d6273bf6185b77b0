// Tests for the small core utilities: random numbers, learning-rate schedules, token
// sampling, the metrics log and resident-memory readings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/train/lr_schedule.h"
#include "core/train/metrics_log.h"
#include "core/run/resource_usage.h"
#include "core/model/rng.h"
#include "core/tools/sampler.h"
#include "kernels/byte_text.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// ---------------------------------------------------------------- random numbers

TEST(Rng, MatchesPublishedSplitMix64Outputs) {
  // First outputs of the reference splitmix64 generator seeded with 0.
  Rng rng(0);
  EXPECT_EQ(rng.next_u64(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.next_u64(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng.next_u64(), 0x06C45D188009454FULL);
  EXPECT_EQ(mix64(0x9e3779b97f4a7c15ULL), 0xE220A8397B1DCDAFULL);
}

TEST(Rng, HashStringIsFnv1aThenMix) {
  // Published FNV-1a 64 values of "" (the offset basis) and "a".
  EXPECT_EQ(hash_string(""), mix64(0xcbf29ce484222325ULL));
  EXPECT_EQ(hash_string("a"), mix64(0xaf63dc4c8601ec8cULL));
  EXPECT_NE(hash_string("layers.0.wq"), hash_string("layers.0.wk"));
}

TEST(Rng, StateRoundTripsForCheckpoints) {
  Rng rng(1234);
  EXPECT_EQ(rng.state(), 1234u);
  rng.next_u64();
  const std::uint64_t saved = rng.state();
  std::vector<std::uint64_t> first;
  for (int i = 0; i < 5; ++i) first.push_back(rng.next_u64());
  Rng resumed(99);
  resumed.set_state(saved);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(resumed.next_u64(), first[i]);
}

TEST(Rng, SequentialUniformsLieInRangeWithTheRightMean) {
  Rng rng(7);
  const int n = 200000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of n uniforms: standard error sqrt(1/12/n); allow 5 of them.
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12.0 / n));
}

TEST(Rng, CounterUniformsLieInRangeWithTheRightMean) {
  const int n = 200000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double u = uniform_at(42, static_cast<std::uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12.0 / n));
}

TEST(Rng, NormalsHaveStandardMoments) {
  const int n = 1000000;
  const std::uint64_t stream = 2024 ^ hash_string("embedding");
  double sum = 0, sum_sq = 0, sum_fourth = 0;
  int beyond_196 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = normal_at(stream, static_cast<std::uint64_t>(i));
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum_sq += x * x;
    sum_fourth += x * x * x * x;
    if (std::fabs(x) > 1.959963984540054) ++beyond_196;
  }
  const double mean = sum / n;
  const double variance = sum_sq / n - mean * mean;
  // Bounds are 5 standard errors: mean sd 1/sqrt(n); variance sd sqrt(2/n);
  // fourth moment (3 for a normal) sd sqrt((105 - 9)/n); a two-sided 5% tail.
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(double(n)));
  EXPECT_NEAR(variance, 1.0, 5 * std::sqrt(2.0 / n));
  EXPECT_NEAR(sum_fourth / n, 3.0, 5 * std::sqrt(96.0 / n));
  EXPECT_NEAR(double(beyond_196) / n, 0.05, 5 * std::sqrt(0.05 * 0.95 / n));
}

// Sample correlation of two equally long sequences.
double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sa += a[i], sb += b[i], saa += a[i] * a[i], sbb += b[i] * b[i], sab += a[i] * b[i];
  }
  const double cov = sab / n - sa / n * sb / n;
  return cov / std::sqrt((saa / n - sa / n * sa / n) * (sbb / n - sb / n * sb / n));
}

TEST(Rng, NeighbouringStreamsAndIndicesAreUncorrelated) {
  const int n = 100000;
  std::vector<double> s0(n), s1(n), next(n);
  for (int i = 0; i < n; ++i) {
    s0[i] = normal_at(5, static_cast<std::uint64_t>(i));
    s1[i] = normal_at(6, static_cast<std::uint64_t>(i));
    next[i] = normal_at(5, static_cast<std::uint64_t>(i) + 1);
  }
  // Under independence the correlation has standard error about 1/sqrt(n).
  EXPECT_NEAR(correlation(s0, s1), 0.0, 5 / std::sqrt(double(n)));
  EXPECT_NEAR(correlation(s0, next), 0.0, 5 / std::sqrt(double(n)));
}

TEST(Rng, CounterValuesAreDeterministic) {
  EXPECT_EQ(normal_at(11, 3), normal_at(11, 3));
  EXPECT_EQ(uniform_at(11, 3), uniform_at(11, 3));
  EXPECT_NE(normal_at(11, 3), normal_at(12, 3));
  EXPECT_NE(normal_at(11, 3), normal_at(11, 4));
}

TEST(Rng, FillNormalDoesNotDependOnPartitioning) {
  const std::size_t n = 1001;
  const std::uint64_t stream = 77 ^ hash_string("layers.3.w_up");
  const double init_std = 0.02;
  std::vector<float> whole(n), pieces(n);
  fill_normal(whole.data(), n, stream, init_std);
  // Three uneven shards, as three ranks would fill them, in a different order.
  fill_normal(pieces.data() + 700, n - 700, stream, init_std, 700);
  fill_normal(pieces.data(), 333, stream, init_std, 0);
  fill_normal(pieces.data() + 333, 367, stream, init_std, 333);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(whole[i], pieces[i]) << "element " << i;
    ASSERT_EQ(whole[i], static_cast<float>(init_std * normal_at(stream, i))) << "element " << i;
  }
}

// ---------------------------------------------------------------- learning-rate schedules

LrScheduleConfig schedule(const std::string& decay, std::int64_t warmup, std::int64_t total) {
  LrScheduleConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = warmup;
  c.total_steps = total;
  c.decay = decay;
  return c;
}

TEST(LrSchedule, WarmupIsLinearFromZero) {
  for (const char* decay : {"cosine", "linear", "constant", "wsd"}) {
    const auto c = schedule(decay, 10, 110);
    EXPECT_DOUBLE_EQ(lr_at(c, 1), 0.1) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 5), 0.5) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 10), 1.0) << decay;
  }
}

TEST(LrSchedule, CosineEndpointsAndMidpoint) {
  const auto c = schedule("cosine", 10, 110);
  EXPECT_DOUBLE_EQ(lr_at(c, 60), 0.55);  // t = 0.5: halfway between lr and min_lr
  // t = 0.25: min + (lr - min) * 0.5 * (1 + cos(pi / 4))
  EXPECT_DOUBLE_EQ(lr_at(c, 35), 0.1 + 0.9 * 0.5 * (1 + std::numbers::sqrt2 / 2));
  EXPECT_DOUBLE_EQ(lr_at(c, 110), 0.1);
}

TEST(LrSchedule, LinearEndpointsAndMidpoint) {
  const auto c = schedule("linear", 10, 110);
  EXPECT_DOUBLE_EQ(lr_at(c, 60), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 35), 1.0 - 0.9 * 0.25);
  EXPECT_DOUBLE_EQ(lr_at(c, 110), 0.1);
}

TEST(LrSchedule, ConstantHoldsTheLearningRate) {
  const auto c = schedule("constant", 10, 110);
  EXPECT_DOUBLE_EQ(lr_at(c, 11), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 60), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 110), 1.0);
}

TEST(LrSchedule, WsdIsStableThenDecaysOverTheLastFraction) {
  auto c = schedule("wsd", 10, 100);
  c.wsd_decay_fraction = 0.2;  // decay over steps 80..100
  EXPECT_DOUBLE_EQ(lr_at(c, 11), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 50), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 80), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 90), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 95), 0.325);
  EXPECT_DOUBLE_EQ(lr_at(c, 100), 0.1);
}

TEST(LrSchedule, WsdDecayNeverStartsBeforeWarmupEnds) {
  auto c = schedule("wsd", 8, 10);
  c.wsd_decay_fraction = 0.5;  // would start at step 5; warmup runs to 8
  EXPECT_DOUBLE_EQ(lr_at(c, 8), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 9), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 10), 0.1);
}

TEST(LrSchedule, NoWarmupStartsNearTheFullRate) {
  const auto c = schedule("cosine", 0, 100);
  EXPECT_DOUBLE_EQ(lr_at(c, 1), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.01)));
  EXPECT_DOUBLE_EQ(lr_at(c, 50), 0.55);
  EXPECT_DOUBLE_EQ(lr_at(c, 100), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("linear", 0, 100), 1), 1.0 - 0.9 * 0.01);
}

TEST(LrSchedule, WarmupCoveringTheWholeRunEndsAtTheFullRate) {
  for (const char* decay : {"cosine", "linear", "constant", "wsd"}) {
    const auto c = schedule(decay, 20, 20);
    EXPECT_DOUBLE_EQ(lr_at(c, 1), 0.05) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 10), 0.5) << decay;
    EXPECT_DOUBLE_EQ(lr_at(c, 20), 1.0) << decay;
  }
}

TEST(LrSchedule, SingleStepRunWithoutWarmupUsesTheFinalValue) {
  EXPECT_DOUBLE_EQ(lr_at(schedule("cosine", 0, 1), 1), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("constant", 0, 1), 1), 1.0);
}

TEST(LrSchedule, StepsPastTheEndKeepTheFinalValue) {
  EXPECT_DOUBLE_EQ(lr_at(schedule("cosine", 10, 110), 500), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("wsd", 10, 110), 500), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(schedule("constant", 10, 110), 500), 1.0);
}

TEST(LrSchedule, RisesThroughWarmupThenNeverRises) {
  for (const char* decay : {"cosine", "linear", "constant", "wsd"}) {
    const auto c = schedule(decay, 7, 53);
    double previous = 0;
    for (std::int64_t step = 1; step <= c.total_steps; ++step) {
      const double lr = lr_at(c, step);
      if (step <= c.warmup_steps) {
        EXPECT_GT(lr, previous) << decay << " step " << step;
      } else {
        EXPECT_LE(lr, previous) << decay << " step " << step;
      }
      EXPECT_GE(lr, c.min_lr) << decay << " step " << step;
      EXPECT_LE(lr, c.lr) << decay << " step " << step;
      previous = lr;
    }
  }
}

TEST(LrSchedule, RejectsUnknownDecayAndBadRanges) {
  EXPECT_THROW(lr_at(schedule("exponential", 0, 10), 1), UserError);
  EXPECT_THROW(lr_at(schedule("cosine", -1, 10), 1), UserError);
  EXPECT_THROW(lr_at(schedule("cosine", 0, 0), 1), UserError);
  auto c = schedule("wsd", 0, 10);
  c.wsd_decay_fraction = 1.5;
  EXPECT_THROW(lr_at(c, 1), UserError);
}

// ---------------------------------------------------------------- token sampling

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

// ---------------------------------------------------------------- metrics log

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A fresh directory under the test temp dir.
std::string scratch_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

LogSection jsonl_only() {
  LogSection log;
  log.tensorboard = false;
  return log;
}

TEST(MetricsLog, LinesParseBackInOrderWithExactValues) {
  const std::string dir = scratch_dir("ustrain_metrics_log_test");
  const std::string path = dir + "/metrics.jsonl";
  const double before = std::chrono::duration<double>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  {
    MetricsLog log(dir, jsonl_only(), std::nullopt);
    EXPECT_EQ(log.files(), path);
    log.write("train", {{"step", 10}, {"loss", 2.718281828459045}, {"lr", 3e-4},
                        {"grad_norm", std::numeric_limits<double>::quiet_NaN()},
                        {"tokens_per_s", std::numeric_limits<double>::infinity()}});
    log.write("eval", {{"step", 20}, {"loss", 0.1 + 0.2}});
  }
  {
    MetricsLog resumed(dir, jsonl_only(), 20);  // reopening appends rather than truncating
    resumed.write("train", {{"step", 21}});
  }
  const double after = std::chrono::duration<double>(
                           std::chrono::system_clock::now().time_since_epoch()).count();

  const std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  const auto first = nlohmann::ordered_json::parse(lines[0]);
  std::vector<std::string> keys;
  for (const auto& item : first.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"kind", "step", "loss", "lr", "grad_norm",
                                            "tokens_per_s", "time"}));
  EXPECT_EQ(first["kind"], "train");
  EXPECT_TRUE(first["step"].is_number_integer());
  EXPECT_EQ(first["step"].get<std::int64_t>(), 10);
  EXPECT_EQ(first["loss"].get<double>(), 2.718281828459045);
  EXPECT_EQ(first["lr"].get<double>(), 3e-4);
  EXPECT_TRUE(first["grad_norm"].is_null());
  EXPECT_TRUE(first["tokens_per_s"].is_null());
  EXPECT_GE(first["time"].get<double>(), before - 1);
  EXPECT_LE(first["time"].get<double>(), after + 1);

  const auto second = nlohmann::ordered_json::parse(lines[1]);
  EXPECT_EQ(second["kind"], "eval");
  EXPECT_EQ(second["loss"].get<double>(), 0.1 + 0.2);  // every bit of the double survives
  const auto third = nlohmann::ordered_json::parse(lines[2]);
  EXPECT_EQ(third["step"].get<std::int64_t>(), 21);
  std::filesystem::remove_all(dir);
}

// GB where it reads as more than zeros; below 0.01 GB the binary units of format_bytes.
TEST(FormatGigabytes, SmallSizesInMibKibOrBytes) {
  EXPECT_EQ(format_gigabytes(2.5e9), "2.50 GB");
  EXPECT_EQ(format_gigabytes(1.0e7), "0.01 GB");
  EXPECT_EQ(format_gigabytes(1.5e9, 3), "1.500 GB");
  EXPECT_EQ(format_gigabytes(5.0 * 1024 * 1024), "5.00 MiB");
  EXPECT_EQ(format_gigabytes(1536), "1.5 KiB");
  EXPECT_EQ(format_gigabytes(0), "0 B");
}

// A run that fails before its first step must leave no metrics.jsonl: the next start would
// take the directory for one that holds a run.
TEST(MetricsLog, NoFileBeforeTheFirstRow) {
  const std::string dir = ::testing::TempDir() + "ustrain_metrics_first_row";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/metrics.jsonl";
  std::filesystem::remove(path);
  {
    MetricsLog log(dir, jsonl_only(), std::nullopt);
    log.sync();
    EXPECT_FALSE(std::filesystem::exists(path));
    log.write("train", {{"step", 1}});
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  std::filesystem::remove_all(dir);
}

TEST(MetricsLog, UnopenablePathIsAUserErrorNamingIt) {
  const std::string dir = ::testing::TempDir() + "no_such_dir_for_ustrain";
  const std::string path = dir + "/metrics.jsonl";
  MetricsLog log(dir, jsonl_only(), std::nullopt);  // the file opens with the first row
  try {
    log.write("train", {{"step", 1}});
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

std::vector<std::string> event_files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) names.push_back(entry.path());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(MetricsLog, ResumingAddsAnEventFileAndANewStartRemovesThem) {
  const std::string dir = scratch_dir("ustrain_metrics_log_events_test");
  LogSection both;
  {
    MetricsLog log(dir, both, std::nullopt);
    log.write("train", {{"step", 1}, {"loss", 5.0}});
    const auto files = event_files_in(dir);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(log.files(), dir + "/metrics.jsonl, " + files[0]);
  }
  { MetricsLog resumed(dir, both, 1); }
  EXPECT_EQ(event_files_in(dir).size(), 2u) << "a resumed run keeps the earlier event files";
  LogSection neither;
  neither.jsonl = neither.tensorboard = false;
  {
    MetricsLog fresh(dir, neither, std::nullopt);
    EXPECT_EQ(fresh.files(), "");
    fresh.write("train", {{"step", 1}, {"loss", 4.0}});
  }
  EXPECT_TRUE(event_files_in(dir).empty()) << "a new start leaves no event file of the earlier run";
  EXPECT_EQ(read_lines(dir + "/metrics.jsonl").size(), 1u) << "log.jsonl = false writes no line";
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------- resident memory

TEST(ResourceUsage, TouchingMemoryRaisesTheResidentSize) {
  const std::size_t before = current_resident_bytes();
  ASSERT_GT(before, 0u) << "/proc/self/status should report VmRSS on Linux";
  const std::size_t bytes = std::size_t{64} << 20;
  std::vector<unsigned char> block(bytes);
  // Publishing the pointer through a volatile keeps the allocation and its writes alive.
  unsigned char* volatile published = block.data();
  for (std::size_t i = 0; i < bytes; ++i) published[i] = static_cast<unsigned char>(i | 1);
  const std::size_t after = current_resident_bytes();
  EXPECT_GE(after, before + (std::size_t{60} << 20));
  EXPECT_GE(peak_resident_bytes(), after);
  EXPECT_EQ(block[12345], static_cast<unsigned char>(12345 | 1));
}

}  // namespace
}  // namespace ustrain
