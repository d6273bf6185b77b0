// Decoding a model with a sliding window (model.sliding_window, core/model/kv_cache.h): the
// cache keeps only the keys the window sees, and every step's logits equal a float64 forward
// written from Hugging Face's Mistral definition (core_safetensors_hf_reference.h), well past
// max_seq_len, where a model without a window would have cut its text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/model/llama.h"
#include "core/model/rng.h"
#include "core/tools/decoder.h"
#include "tests/unit/core/checkpoint/safetensors_hf_reference.h"

namespace ustrain {
namespace {

constexpr std::int64_t kWindow = 5, kMaxSeq = 16;

ModelSection windowed_model(std::int64_t window) {
  ModelSection m;
  m.vocab_size = 19;
  m.d_model = 16;
  m.n_layers = 3;
  m.n_heads = 4;  // head_dim 4
  m.n_kv_heads = 2;
  m.ffn_hidden = 24;
  m.max_seq_len = kMaxSeq;
  m.sliding_window = window;
  m.init_std = 0.3;  // large enough that attention is far from uniform
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
  // The parameters as float64, by their (Hugging Face) names.
  hf_reference::Weights weights() const {
    hf_reference::Weights w;
    for (std::size_t i = 0; i < model.params().specs().size(); ++i) {
      const Tensor& t = model.params()[static_cast<int>(i)].value;
      w[model.params().specs()[i].name].assign(t.f32(), t.f32() + t.numel());
    }
    return w;
  }
  std::vector<float> host(const Tensor& logits) const {
    std::vector<float> h(static_cast<std::size_t>(logits.numel()));
    backend->copy(Tensor(h.data(), logits.shape), logits);
    return h;
  }
};

std::vector<std::int32_t> random_tokens(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < n; ++i) ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 19));
  return ids;
}

// Equal within 1e-5 of the largest logit's magnitude; the logits must not be flat.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0, spread = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (double w : want) spread = std::max(spread, std::abs(w - want[0]));
  ASSERT_GT(spread, 1e-2) << where;
  for (std::size_t v = 0; v < got.size(); ++v) ASSERT_NEAR(got[v], want[v], 1e-5 * scale) << where << ", token " << v;
}

// A prompt of `prompt` tokens, then one token per call, to 3 max_seq_len: every call's logits
// against the reference's at the same position.
void check_windowed_decoder(std::size_t prompt) {
  const ModelSection cfg = windowed_model(kWindow);
  Model m(cfg);
  const std::vector<std::int32_t> ids = random_tokens(3 * kMaxSeq, 5);
  const std::vector<std::vector<double>> want = hf_reference::reference_logits(m.weights(), cfg, ids);
  Decoder decoder(m.model, *m.backend);
  for (std::size_t end = prompt; end <= ids.size(); ++end) {
    const std::vector<std::int32_t> text(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(end));
    const std::vector<float> got = m.host(decoder.next(text));
    EXPECT_FALSE(decoder.windowed()) << "a model with a sliding window never cuts its text";
    expect_close(got, want[end - 1], std::to_string(end) + " tokens");
  }
}

TEST(SlidingWindowDecoder, OneTokenAtATimePastMaxSeqLen) { check_windowed_decoder(1); }
// 23 tokens: five steps of at most min(S, W) = 5 positions, moving the kept keys in between.
TEST(SlidingWindowDecoder, LongPromptInSteps) { check_windowed_decoder(23); }

// The reference can tell the window from none: the test above could not pass without one.
TEST(SlidingWindowDecoder, TheWindowChangesTheLogits) {
  Model m(windowed_model(kWindow));
  const std::vector<std::int32_t> ids = random_tokens(kMaxSeq, 5);
  const auto with = hf_reference::reference_logits(m.weights(), windowed_model(kWindow), ids).back();
  const auto without = hf_reference::reference_logits(m.weights(), windowed_model(0), ids).back();
  double most = 0;
  for (std::size_t v = 0; v < with.size(); ++v) most = std::max(most, std::abs(with[v] - without[v]));
  EXPECT_GT(most, 1e-2);
}

// The cache holds W - 1 keys and one step's new ones, not max_seq_len; without a window, S.
TEST(SlidingWindowDecoder, TheCacheKeepsOnlyTheWindow) {
  Model windowed(windowed_model(kWindow));
  KvCache cache(windowed.model, *windowed.backend);
  EXPECT_EQ(cache.window(), kWindow);
  EXPECT_EQ(cache.step_limit(), kWindow);
  EXPECT_EQ(cache.layer(0, 1).attention.kv.shape.rows(), 2 * kWindow - 1);
  Model plain(windowed_model(0));
  KvCache full(plain.model, *plain.backend);
  EXPECT_EQ(full.layer(0, 1).attention.kv.shape.rows(), kMaxSeq);
  EXPECT_EQ(full.step_limit(), kMaxSeq);
}

// A window wider than the sequence: steps of at most S positions, W - 1 + S rows.
TEST(SlidingWindowDecoder, AWindowWiderThanTheSequence) {
  const ModelSection cfg = windowed_model(3 * kMaxSeq);
  Model m(cfg);
  KvCache cache(m.model, *m.backend);
  EXPECT_EQ(cache.step_limit(), kMaxSeq);
  const std::vector<std::int32_t> ids = random_tokens(5 * kMaxSeq, 9);
  const std::vector<std::vector<double>> want = hf_reference::reference_logits(m.weights(), cfg, ids);
  Decoder decoder(m.model, *m.backend);
  for (std::size_t end : {std::size_t{40}, std::size_t{41}, 5 * static_cast<std::size_t>(kMaxSeq)}) {
    const std::vector<std::int32_t> text(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(end));
    expect_close(m.host(decoder.next(text)), want[end - 1], std::to_string(end) + " tokens");
  }
}

}  // namespace
}  // namespace ustrain
