// Export to Hugging Face safetensors. The file is read with a parser written from the
// specification and run through a float64 Llama forward written from Hugging Face's
// definition (rotate-half RoPE, repeat-kv GQA): it must give ustrain's loss, while the
// interleaved RoPE convention must not, so a permuted q_proj/k_proj could not pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/interop/interop.h"
#include "core/checkpoint/reader.h"
#include "core/model/rng.h"
#include "core/checkpoint/safetensors_dtype.h"
#include "core/interop/hf_llama.h"
#include "tests/unit/core/checkpoint/safetensors_hf_reference.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using namespace ustrain::hf_reference;
namespace fs = std::filesystem;

TEST_F(HfInterop, ExportMatchesAnIndependentHuggingFaceForward) {
  const Recipe recipe = interop_recipe(false);
  Model m(recipe.model);
  const std::string ckpt = save_checkpoint(recipe, m, "ckpt");
  export_checkpoint({ckpt, path("hf"), "fp32", 5'000'000'000, ""});
  const Weights w = read_safetensors(path("hf/model.safetensors"));
  EXPECT_EQ(w.size(), 2u + 9u * 2u + 1u);  // embed, 9 per layer, norm, lm_head
  for (const ParamSpec& s : m.model.params().specs()) {
    ASSERT_TRUE(w.count(s.name)) << s.name;
    const float* v = m.values(s.name);
    for (std::size_t i = 0; i < w.at(s.name).size(); ++i) ASSERT_EQ(w.at(s.name)[i], static_cast<double>(v[i])) << s.name;
  }
  std::vector<std::int32_t> ids, targets;
  Rng rng(3);
  for (int t = 0; t < 16; ++t) ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 257));
  for (int t = 0; t < 16; ++t) targets.push_back(t + 1 < 16 ? ids[static_cast<std::size_t>(t + 1)] : 0);
  const double ours = m.model.forward(*m.backend, {ids, targets}, 1, 16) / 16.0;
  const double hf = reference_loss(w, recipe.model, ids, targets, /*rotate_half=*/true);
  const double interleaved = reference_loss(w, recipe.model, ids, targets, /*rotate_half=*/false);
  EXPECT_NEAR(ours, hf, 1e-5 * std::abs(hf));
  EXPECT_GT(std::abs(interleaved - hf), 1e-2) << "the test cannot tell the RoPE conventions apart";

  const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json({"LlamaForCausalLM"}));
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["hidden_size"], 16);
  EXPECT_EQ(config["intermediate_size"], 24);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["num_attention_heads"], 4);
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["head_dim"], 4);
  EXPECT_EQ(config["vocab_size"], 257);
  EXPECT_EQ(config["max_position_embeddings"], 16);
  EXPECT_EQ(config["rope_theta"], 100.0);
  EXPECT_EQ(config["rms_norm_eps"], 1e-5);
  EXPECT_EQ(config["tie_word_embeddings"], false);
  EXPECT_EQ(config["hidden_act"], "silu");
  EXPECT_EQ(config["torch_dtype"], "float32");
  EXPECT_EQ(config["attention_bias"], false);
  EXPECT_EQ(config["mlp_bias"], false);
  EXPECT_EQ(model_from_llama_config(config.dump(), "config.json"), recipe.model);
}

// With llama3 RoPE scaling the model computes what Hugging Face's does, and not what it
// computes unscaled; config.json carries the scaling.
TEST_F(HfInterop, Llama3ScaledModelMatchesTheHuggingFaceForward) {
  // head_dim 4, theta 100: wavelengths 6.3 (blended) and 63 (divided) against limits 4 and 16.
  const Recipe recipe = parse_recipe(to_toml(interop_recipe(false)), "scaled.toml",
                                     {"model.rope_scaling=llama3", "model.rope_scaling_factor=8.0",
                                      "model.rope_original_max_seq_len=16"});
  Model m(recipe.model);
  const std::string ckpt = save_checkpoint(recipe, m, "ckpt");
  export_checkpoint({ckpt, path("hf"), "fp32", 5'000'000'000, ""});
  const Weights w = read_safetensors(path("hf/model.safetensors"));
  std::vector<std::int32_t> ids, targets;
  Rng rng(5);
  for (int t = 0; t < 16; ++t) ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 257));
  for (int t = 0; t < 16; ++t) targets.push_back(t + 1 < 16 ? ids[static_cast<std::size_t>(t + 1)] : 0);
  const double ours = m.model.forward(*m.backend, {ids, targets}, 1, 16) / 16.0;
  const double hf = reference_loss(w, recipe.model, ids, targets, /*rotate_half=*/true);
  ModelSection unscaled = recipe.model;
  unscaled.rope_scaling = "none";
  const double plain = reference_loss(w, unscaled, ids, targets, /*rotate_half=*/true);
  EXPECT_NEAR(ours, hf, 1e-5 * std::abs(hf));
  EXPECT_GT(std::abs(plain - hf), 1e-3) << "the test cannot tell scaled from unscaled RoPE";

  const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/config.json")));
  EXPECT_EQ(config["rope_scaling"], nlohmann::json({{"factor", 8.0}, {"low_freq_factor", 1.0},
                                                    {"high_freq_factor", 4.0},
                                                    {"original_max_position_embeddings", 16},
                                                    {"rope_type", "llama3"}}));
  EXPECT_EQ(model_from_llama_config(config.dump(), "config.json"), recipe.model);
}

TEST_F(HfInterop, Bf16ExportRoundsAndTiedExportOmitsTheHead) {
  const Recipe recipe = interop_recipe(true);
  Model m(recipe.model);
  const std::string ckpt = save_checkpoint(recipe, m, "ckpt");
  export_checkpoint({ckpt, path("hf"), "bf16", 5'000'000'000, ""});
  std::string dtype;
  const Weights w = read_safetensors(path("hf/model.safetensors"), &dtype);
  EXPECT_EQ(dtype, "BF16");
  EXPECT_EQ(w.count("lm_head.weight"), 0u);
  const float* q = m.values("model.layers.1.self_attn.q_proj.weight");
  const auto& got = w.at("model.layers.1.self_attn.q_proj.weight");
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<double>(bf16_to_float(float_to_bf16(q[i]))));
  const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/config.json")));
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
}

}  // namespace
}  // namespace ustrain
