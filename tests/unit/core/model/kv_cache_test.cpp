// Decoding with a key/value cache (core/model/kv_cache.h, core/tools/decoder.h): the logits of
// each cached step against the whole model's forward of the same tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/model/llama.h"
#include "core/model/rng.h"
#include "core/tools/decoder.h"

namespace ustrain {
namespace {

ModelSection small_model(std::int64_t kv_heads, std::int64_t max_seq) {
  ModelSection m;
  m.vocab_size = 19;
  m.d_model = 16;
  m.n_layers = 3;
  m.n_heads = 4;  // head_dim 4
  m.n_kv_heads = kv_heads;
  m.ffn_hidden = 24;
  m.max_seq_len = max_seq;
  m.init_std = 0.3;  // large enough that attention is far from uniform
  return m;
}

// Layer 0 dense, the others a mixture of 4 experts (top-2).
ModelSection small_moe(std::int64_t max_seq) {
  ModelSection m = small_model(2, max_seq);
  m.n_experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn_hidden = 8;
  m.first_dense_layers = 1;
  return m;
}

struct Model {
  std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
  LlamaModel model;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;

  explicit Model(const ModelSection& cfg) : model(cfg, 1, cfg.max_seq_len, Recompute::none) {
    model.plan(plan);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    model.bind(*memory, *backend);
    model.initialise(*backend, 11);
  }
  std::vector<float> host(const Tensor& logits) const {
    std::vector<float> h(static_cast<std::size_t>(logits.numel()));
    backend->copy(Tensor(h.data(), logits.shape), logits);
    return h;
  }
  // The logits of the last of `ids` by the whole forward of its last max_seq_len tokens.
  std::vector<float> reference(const std::vector<std::int32_t>& ids) {
    const auto s = std::min<std::size_t>(ids.size(), static_cast<std::size_t>(model.geometry().seq));
    const std::vector<std::int32_t> window(ids.end() - static_cast<std::ptrdiff_t>(s), ids.end());
    const std::vector<std::int32_t> no_targets(s, -1);
    const auto n = static_cast<std::int64_t>(s);
    model.forward(*backend, {window, no_targets}, 1, n);
    return host(model.logits().slice(n - 1, n));
  }
};

std::vector<std::int32_t> random_tokens(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < n; ++i) ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 19));
  return ids;
}

// Equal within 1e-5 of the largest logit's magnitude; the logits must not be flat.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size());
  float scale = 0, spread = 0;
  for (float w : want) scale = std::max(scale, std::abs(w));
  for (float w : want) spread = std::max(spread, std::abs(w - want[0]));
  ASSERT_GT(spread, 1e-2f) << where;
  for (std::size_t v = 0; v < got.size(); ++v) ASSERT_NEAR(got[v], want[v], 1e-5f * scale) << where << ", token " << v;
}

// A prompt of several tokens in one step, then one token per step: every step's logits equal
// the forward of the whole sequence so far.
void check_cached_steps(const ModelSection& cfg) {
  Model m(cfg);
  KvCache cache(m.model, *m.backend);
  const std::vector<std::int32_t> ids = random_tokens(25, 3);
  constexpr std::size_t prompt = 5;
  std::vector<std::int32_t> seen(ids.begin(), ids.begin() + prompt);
  std::vector<float> got = m.host(m.model.decode(*m.backend, cache, seen.data(), prompt));
  expect_close(got, m.reference(seen), "the prompt");
  EXPECT_EQ(cache.length(), static_cast<std::int64_t>(prompt));
  for (std::size_t p = prompt; p < ids.size(); ++p) {
    seen.push_back(ids[p]);
    got = m.host(m.model.decode(*m.backend, cache, &ids[p], 1));
    expect_close(got, m.reference(seen), "position " + std::to_string(p));
  }
  EXPECT_EQ(cache.length(), static_cast<std::int64_t>(ids.size()));
}

TEST(KvCache, MultiHeadStepsMatchTheForward) { check_cached_steps(small_model(4, 32)); }
TEST(KvCache, GroupedQueryStepsMatchTheForward) { check_cached_steps(small_model(2, 32)); }
TEST(KvCache, MixtureOfExpertsStepsMatchTheForward) { check_cached_steps(small_moe(32)); }

TEST(KvCache, StepsPastTheEndAreRefused) {
  Model m(small_model(2, 4));
  KvCache cache(m.model, *m.backend);
  const std::vector<std::int32_t> ids = random_tokens(5, 4);
  m.model.decode(*m.backend, cache, ids.data(), 4);
  EXPECT_ANY_THROW(m.model.decode(*m.backend, cache, &ids[4], 1));
}

// The decoder over texts that grow past max_seq_len = 8: from a short prompt, and from a prompt
// longer than the window; every step against the forward of the text's last 8 tokens.
void check_decoder(std::size_t prompt, std::size_t steps) {
  Model m(small_model(2, 8));
  Decoder decoder(m.model, *m.backend);
  const std::vector<std::int32_t> ids = random_tokens(prompt + steps, 5);
  for (std::size_t end = prompt; end <= ids.size(); ++end) {
    const std::vector<std::int32_t> text(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(end));
    const std::vector<float> got = m.host(decoder.next(text));
    EXPECT_EQ(decoder.windowed(), end > 8) << end << " tokens";
    expect_close(got, m.reference(text), std::to_string(end) + " tokens");
  }
}

TEST(Decoder, ShortPromptGrowsPastTheWindow) { check_decoder(3, 20); }
TEST(Decoder, PromptLongerThanTheWindow) { check_decoder(11, 20); }

TEST(Decoder, AnotherTextStartsOver) {
  Model m(small_model(2, 8));
  Decoder decoder(m.model, *m.backend);
  const std::vector<std::int32_t> a = random_tokens(6, 6), b = random_tokens(4, 7);
  decoder.next(a);
  expect_close(m.host(decoder.next(b)), m.reference(b), "a second text");
  const std::vector<std::int32_t> shorter(a.begin(), a.begin() + 3);
  expect_close(m.host(decoder.next(shorter)), m.reference(shorter), "a shorter text");
}

}  // namespace
}  // namespace ustrain
