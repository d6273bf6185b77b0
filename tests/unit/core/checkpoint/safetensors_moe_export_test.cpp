// Export of mixtures of experts to Hugging Face safetensors. The file and config.json are run
// through float64 Mixtral and Qwen2-MoE forwards written from Hugging Face's definitions
// (core_safetensors_hf_reference.h): on four random sequences they must give ustrain's loss
// (within 1e-5 relative, for float32 against float64; observed ~1e-7), with every routing
// choice far from a tie, while a
// wrong mapping (w1 and w3 swapped, the shared expert's down_proj not doubled, the top-k
// weights renormalised or not) must not.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/interop/interop.h"
#include "core/model/rng.h"
#include "tests/unit/core/checkpoint/safetensors_hf_reference.h"

namespace ustrain {
namespace {

using namespace ustrain::hf_reference;

struct Tokens {
  std::vector<std::int32_t> ids, targets;
};

Tokens random_tokens(std::uint64_t seed) {
  Tokens t;
  Rng rng(seed);
  for (int i = 0; i < 16; ++i) t.ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 257));
  for (int i = 0; i < 16; ++i) t.targets.push_back(i + 1 < 16 ? t.ids[static_cast<std::size_t>(i + 1)] : 0);
  return t;
}

// The reference's loss on four random sequences, one by one.
std::vector<double> reference_losses(const Weights& w, const nlohmann::json& config, double* gap = nullptr) {
  std::vector<double> losses;
  if (gap) *gap = 1e300;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Tokens t = random_tokens(seed);
    double g = 0;
    losses.push_back(reference_moe_loss(w, config, t.ids, t.targets, &g));
    if (gap) *gap = std::min(*gap, g);
  }
  return losses;
}

// How far a wrong mapping's losses are from the right one's, summed over the sequences.
double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i]);
  return d;
}

// ustrain's loss against the reference's on each sequence: the same within 1e-5 relative,
// with every routing choice at least 1e-4 from a tie (float32's errors are ~1e-7).
void expect_same_losses(LlamaModel& model, Backend& backend, const std::vector<double>& reference, double gap) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Tokens t = random_tokens(seed);
    const double ours = model.forward(backend, {t.ids, t.targets}, 1, 16) / 16.0;
    EXPECT_NEAR(ours, reference[seed - 1], 1e-5 * std::abs(reference[seed - 1])) << "sequence " << seed;
  }
  EXPECT_GT(gap, 1e-4) << "a near tie in the routing: float32 and float64 could choose other experts";
}

Recipe moe_recipe(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"model.n_experts=4", "model.experts_per_token=2", "model.expert_ffn_hidden=8"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return parse_recipe(to_toml(interop_recipe(false)), "moe.toml", all);
}

// Every tensor whose name ends with `suffix` times `factor`.
Weights scaled(Weights w, const std::string& suffix, double factor) {
  for (auto& [name, values] : w)
    if (name.ends_with(suffix))
      for (double& v : values) v *= factor;
  return w;
}

// The tensors named `a` and `b` (suffixes) of every expert exchanged.
Weights swapped(Weights w, const std::string& a, const std::string& b) {
  for (auto& [name, values] : w)
    if (name.find(".experts.") != std::string::npos && name.ends_with(a))
      std::swap(values, w.at(name.substr(0, name.size() - a.size()) + b));
  return w;
}

TEST_F(HfInterop, MixtralExportMatchesAnIndependentHuggingFaceForward) {
  const Recipe recipe = moe_recipe({});
  Model m(recipe.model);
  export_checkpoint({save_checkpoint(recipe, m, "ckpt"), path("hf"), "fp32", 5'000'000'000, ""});
  const Weights w = read_safetensors(path("hf/model.safetensors"));
  const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/config.json")));
  ASSERT_EQ(config["model_type"], "mixtral");
  double gap = 0;
  const std::vector<double> hf = reference_losses(w, config, &gap);
  expect_same_losses(m.model, *m.backend, hf, gap);
  EXPECT_GT(distance(reference_losses(swapped(w, "w1.weight", "w3.weight"), config), hf), 1e-2)
      << "the test cannot tell w1 from w3";
}

// Qwen2-MoE with everything its layout adds to Mixtral's: a dense first layer, two shared
// experts (one of width 8 in Hugging Face's terms, gated by sigmoid(0)), q/k/v biases (zero),
// and top-k weights that are not renormalised (norm_topk_prob false, Qwen1.5-MoE's setting).
TEST_F(HfInterop, Qwen2MoeExportMatchesAnIndependentHuggingFaceForward) {
  const Recipe recipe = moe_recipe({"model.n_layers=3", "model.first_dense_layers=1", "model.n_shared_experts=2",
                                    "model.shared_expert_ffn_hidden=4", "model.router_renormalize=false"});
  Model m(recipe.model);
  export_checkpoint({save_checkpoint(recipe, m, "ckpt"), path("hf"), "fp32", 5'000'000'000, "qwen2_moe"});
  const Weights w = read_safetensors(path("hf/model.safetensors"));
  const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/config.json")));
  ASSERT_EQ(config["model_type"], "qwen2_moe");
  EXPECT_EQ(config["mlp_only_layers"], nlohmann::json({0}));
  EXPECT_EQ(config["shared_expert_intermediate_size"], 8);
  EXPECT_EQ(config["norm_topk_prob"], false);
  EXPECT_EQ(w.at("model.layers.2.mlp.shared_expert.down_proj.weight").size(), 16u * 8u);
  EXPECT_EQ(w.count("model.layers.0.mlp.gate.weight"), 0u);
  double gap = 0;
  const std::vector<double> hf = reference_losses(w, config, &gap);
  expect_same_losses(m.model, *m.backend, hf, gap);

  const auto wrong = [&](const Weights& weights, const nlohmann::json& c) {
    return distance(reference_losses(weights, c), hf);
  };
  EXPECT_GT(wrong(scaled(w, "shared_expert.down_proj.weight", 0.5), config), 1e-2)
      << "the test cannot tell whether the shared expert's down_proj was doubled";
  EXPECT_GT(wrong(swapped(w, "gate_proj.weight", "up_proj.weight"), config), 1e-2)
      << "the test cannot tell the experts' gate_proj from up_proj";
  nlohmann::json renormalised = config;
  renormalised["norm_topk_prob"] = true;
  EXPECT_GT(wrong(w, renormalised), 1e-2) << "the test cannot tell renormalised top-k weights";
  Weights biased = w;
  for (double& b : biased.at("model.layers.1.self_attn.k_proj.bias")) b = 0.5;
  EXPECT_GT(wrong(biased, config), 1e-2) << "the reference ignores the attention biases";
}

// Without shared experts the Qwen2-MoE shared expert has width 0: empty tensors, no output.
TEST_F(HfInterop, Qwen2MoeWithoutSharedExpertsHasAnEmptySharedExpert) {
  const Recipe recipe = moe_recipe({"model.first_dense_layers=1"});
  Model m(recipe.model);
  export_checkpoint({save_checkpoint(recipe, m, "ckpt"), path("hf"), "fp32", 5'000'000'000, "qwen2_moe"});
  const Weights w = read_safetensors(path("hf/model.safetensors"));
  const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/config.json")));
  EXPECT_EQ(config["shared_expert_intermediate_size"], 0);
  EXPECT_TRUE(w.at("model.layers.1.mlp.shared_expert.gate_proj.weight").empty());
  EXPECT_TRUE(w.at("model.layers.1.mlp.shared_expert.down_proj.weight").empty());
  double gap = 0;
  const std::vector<double> hf = reference_losses(w, config, &gap);
  expect_same_losses(m.model, *m.backend, hf, gap);
}

}  // namespace
}  // namespace ustrain
