// RoPE frequencies: unscaled ones are the exact powers of theta the tables always used, and
// llama3 scaling matches a float64 reference written from the published formula; the model
// turns with them.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>
#include <vector>

#include "core/model/llama.h"
#include "core/model/rope_frequencies.h"
#include "core/recipe/recipe.h"

namespace ustrain {
namespace {

ModelSection llama3(double theta, double factor, double low, double high, std::int64_t original) {
  ModelSection m;
  m.rope_theta = theta;
  m.rope_scaling = "llama3";
  m.rope_scaling_factor = factor;
  m.rope_low_freq_factor = low;
  m.rope_high_freq_factor = high;
  m.rope_original_max_seq_len = original;
  return m;
}

// The published Llama 3 rule, in float64: for freq = 1 / theta^(2i/d) and wavelen = 2 pi / freq,
// keep it when wavelen < original / high_freq_factor, divide it by factor when wavelen >
// original / low_freq_factor, and in between blend with smooth = (original / wavelen - low) /
// (high - low): (1 - smooth) * freq / factor + smooth * freq.
struct Reference {
  std::vector<double> freq;
  int kept = 0, scaled = 0, blended = 0;
};
Reference published_llama3(const ModelSection& m, int head_dim) {
  Reference r;
  const double original = static_cast<double>(m.rope_original_max_seq_len);
  const double low = m.rope_low_freq_factor, high = m.rope_high_freq_factor, factor = m.rope_scaling_factor;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(m.rope_theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < original / high) {
      r.freq.push_back(freq);
      ++r.kept;
    } else if (wavelen > original / low) {
      r.freq.push_back(freq / factor);
      ++r.scaled;
    } else {
      const double smooth = (original / wavelen - low) / (high - low);
      r.freq.push_back((1 - smooth) * freq / factor + smooth * freq);
      ++r.blended;
    }
  }
  return r;
}

TEST(RopeFrequencies, UnscaledAreTheThetaPowersTheTablesAlwaysUsed) {
  for (double theta : {10000.0, 500000.0, 100.0})
    for (int head_dim : {2, 8, 64, 128}) {
      ModelSection m;
      m.rope_theta = theta;
      const std::vector<double> f = rope_inverse_frequencies(m, head_dim);
      ASSERT_EQ(f.size(), static_cast<std::size_t>(head_dim / 2));
      const double half = head_dim / 2;
      for (std::size_t i = 0; i < f.size(); ++i)  // bit for bit: existing checkpoints compute the same
        ASSERT_EQ(f[i], std::pow(theta, -static_cast<double>(i) / half)) << theta << " " << head_dim << " " << i;
    }
}

TEST(RopeFrequencies, Llama3MatchesTheFloat64ReferenceOfThePublishedFormula) {
  struct Case {
    ModelSection model;
    int head_dim;
  };
  const Case cases[] = {
      {llama3(500000.0, 8.0, 1.0, 4.0, 8192), 128},   // Llama 3.1
      {llama3(500000.0, 32.0, 1.0, 4.0, 8192), 64},   // Llama 3.2 1B
      {llama3(10000.0, 4.0, 2.0, 8.0, 256), 32},      // other factors, a short original context
  };
  for (const Case& c : cases) {
    const Reference want = published_llama3(c.model, c.head_dim);
    // Every regime is exercised, or the comparison proves less than it seems.
    EXPECT_GT(want.kept, 0);
    EXPECT_GT(want.scaled, 0);
    EXPECT_GT(want.blended, 0);
    const std::vector<double> got = rope_inverse_frequencies(c.model, c.head_dim);
    ASSERT_EQ(got.size(), want.freq.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want.freq[i], 1e-14 * want.freq[i]) << "pair " << i << " of head_dim " << c.head_dim;
  }
  // Llama 3.1's first pair turns at full speed and its last at 1/8 of theta^(-126/128).
  const std::vector<double> f = rope_inverse_frequencies(cases[0].model, 128);
  EXPECT_EQ(f.front(), 1.0);
  EXPECT_NEAR(f.back(), std::pow(500000.0, -126.0 / 128.0) / 8.0, 1e-15 * f.back());
}

// A bound model turns by the scaled frequencies: the first position (angle 0) is unchanged,
// later ones are not.
TEST(RopeFrequencies, TheModelUsesTheScaledFrequencies) {
  const auto logits_of = [](const ModelSection& m) {
    auto backend = make_backend(Device::cpu, 1);
    LlamaModel model(m, 1, 8, Recompute::none);
    MemoryPlan plan;
    model.plan(plan);
    PlannedMemory memory(plan, *backend);
    model.bind(memory, *backend);
    model.initialise(*backend, 7);
    const std::vector<std::int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6}, targets(8, -1);
    model.forward(*backend, {ids, targets}, 1, 8);
    const Tensor logits = model.logits();  // (8, V)
    return std::vector<float>(logits.f32(), logits.f32() + logits.numel());
  };
  ModelSection plain;
  plain.vocab_size = 11;
  plain.d_model = 16;
  plain.n_layers = 1;
  plain.n_heads = 2;
  plain.n_kv_heads = 1;
  plain.ffn_hidden = 8;
  plain.max_seq_len = 8;
  // head_dim 8, theta 10000: wavelengths 6.3, 63, 628, 6283 against limits 16 and 64.
  ModelSection scaled = plain;
  scaled.rope_scaling = "llama3";
  scaled.rope_original_max_seq_len = 64;
  const std::vector<float> a = logits_of(plain), b = logits_of(scaled);
  const std::size_t v = 11;
  EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + v), std::vector<float>(b.begin(), b.begin() + v));
  EXPECT_NE(std::vector<float>(a.begin() + v, a.end()), std::vector<float>(b.begin() + v, b.end()));
}

}  // namespace
}  // namespace ustrain
