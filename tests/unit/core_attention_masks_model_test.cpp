// The attention sub-layer's masks through the whole model (core/model/grouped_query_attention.h)
// against an independent reference written from their semantics: target i's loss under the mask
// is its loss given only the tokens query i may see (its document, the last W tokens), run as a
// sequence of its own through an unmasked model with the same weights. RoPE is relative, so the
// positions the reference starts at 0 change nothing but rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/model/llama.h"
#include "core/model/rng.h"

namespace ustrain {
namespace {

constexpr std::int64_t kSeq = 12, kBatch = 2;
constexpr std::int32_t kEos = 10;

// A window's reach grows by W - 1 tokens per layer (a key's own row saw W - 1 before it), so
// the reference holds for one layer; documents bound every layer alike, so two are checked.
ModelSection tiny_model(std::int64_t window, std::int64_t layers) {
  ModelSection m;
  m.vocab_size = 11;
  m.d_model = 12;
  m.n_layers = layers;
  m.n_heads = 3;     // head_dim 4
  m.n_kv_heads = 1;  // grouped-query: three q heads share one kv head
  m.ffn_hidden = 10;
  m.max_seq_len = kSeq;
  m.init_std = 0.3;  // large enough that every token's context shows in its loss
  m.sliding_window = window;
  return m;
}

ModelGeometry geometry_of(const ModelSection& cfg, bool documents) {
  ModelGeometry g = ModelGeometry::of(cfg, {}, kSeq);
  g.documents = documents;
  return g;
}

struct MaskedModel {
  std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
  LlamaModel model;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;

  MaskedModel(const ModelSection& cfg, bool documents)
      : model(cfg, geometry_of(cfg, documents), kBatch, Recompute::none) {
    model.plan(plan);
    memory = std::make_unique<PlannedMemory>(plan, *backend);
    model.bind(*memory, *backend);
    model.initialise(*backend, 42);
  }
  double loss(const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& targets,
              const std::vector<std::int32_t>& documents, std::int64_t batch, std::int64_t seq) {
    TokenBatch tokens(ids, targets);
    tokens.documents = documents;
    return model.forward(*backend, tokens, batch, seq);
  }
};

// Two packed windows: documents end with kEos (row 0: a document of one token among them).
struct Packed {
  std::vector<std::int32_t> ids, targets, documents;
};

Packed packed() {
  Packed p;
  Rng rng(7);
  for (std::int64_t i = 0; i < kBatch * kSeq; ++i) {
    p.ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 10));
    p.targets.push_back(static_cast<std::int32_t>(rng.next_u64() % 11));
  }
  for (const std::int64_t end : {std::int64_t{2}, std::int64_t{3}, std::int64_t{7}, kSeq + 5})
    p.ids[static_cast<std::size_t>(end)] = kEos;
  // Written out from the semantics (an EOS ends its document), not computed by the loader.
  p.documents = {0, 0, 0, 1, 2, 2, 2, 2, 3, 3, 3, 3, /* row 1 */ 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
  return p;
}

// The sum over every target of its loss given only the keys its query sees: those of its own
// document (with `documents`) and within `window` tokens (0: all before it).
double reference_loss(MaskedModel& unmasked, const Packed& p, bool documents, std::int64_t window) {
  double sum = 0;
  for (std::int64_t b = 0; b < kBatch; ++b) {
    const auto at = [&](std::int64_t i) { return static_cast<std::size_t>(b * kSeq + i); };
    for (std::int64_t i = 0; i < kSeq; ++i) {
      std::int64_t first = window > 0 ? std::max<std::int64_t>(0, i - window + 1) : 0;
      while (documents && p.documents[at(first)] != p.documents[at(i)]) ++first;
      const std::vector<std::int32_t> ids(p.ids.begin() + static_cast<std::ptrdiff_t>(at(first)),
                                          p.ids.begin() + static_cast<std::ptrdiff_t>(at(i)) + 1);
      std::vector<std::int32_t> targets(ids.size(), -1);  // only target i counts
      targets.back() = p.targets[at(i)];
      sum += unmasked.loss(ids, targets, {}, 1, static_cast<std::int64_t>(ids.size()));
    }
  }
  return sum;
}

struct MaskCase {
  const char* name;
  bool documents;
  std::int64_t window;
};

class AttentionMasks : public testing::TestWithParam<MaskCase> {};

TEST_P(AttentionMasks, EachTargetsLossIsItsLossGivenOnlyTheTokensItSees) {
  const MaskCase c = GetParam();
  const Packed p = packed();
  const std::int64_t layers = c.window > 1 ? 1 : 2;
  MaskedModel masked(tiny_model(c.window, layers), c.documents);
  MaskedModel unmasked(tiny_model(0, layers), false);
  const double causal = unmasked.loss(p.ids, p.targets, {}, kBatch, kSeq);
  // The same weights: the masked model's keys off, it is the causal model.
  ASSERT_DOUBLE_EQ(MaskedModel(tiny_model(0, layers), c.documents).loss(p.ids, p.targets, {}, kBatch, kSeq), causal);
  const std::vector<std::int32_t> documents = c.documents ? p.documents : std::vector<std::int32_t>{};
  const double got = masked.loss(p.ids, p.targets, documents, kBatch, kSeq);
  const double want = reference_loss(unmasked, p, c.documents, c.window);
  EXPECT_NEAR(got, want, 1e-5 * want) << c.name;
  EXPECT_GT(std::abs(got - causal), 1e-3 * causal) << c.name << ": the mask changed nothing";
}

INSTANTIATE_TEST_SUITE_P(Model, AttentionMasks,
                         testing::Values(MaskCase{"documents", true, 0}, MaskCase{"window of 3", false, 3},
                                         MaskCase{"window of 1", false, 1},
                                         MaskCase{"documents longer than a window of 3", true, 3}),
                         [](const testing::TestParamInfo<MaskCase>& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), ' ', '_');
                           return name;
                         });

}  // namespace
}  // namespace ustrain
