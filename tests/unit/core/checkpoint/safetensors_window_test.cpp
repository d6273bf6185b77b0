// Sliding windows across the Hugging Face boundary: a dense model with model.sliding_window is
// exported as a Mistral (MistralForCausalLM, sliding_window in config.json) that computes, under
// a float64 forward written from Hugging Face's Mistral definition, the loss ustrain's decoder
// computes; it imports back bit-identically; Mistral's own configs import, null meaning no
// window; bad windows are refused naming the file and the key.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint/reader.h"
#include "core/interop/hf_layout.h"
#include "core/interop/hf_llama.h"
#include "core/interop/interop.h"
#include "core/model/rng.h"
#include "core/tools/decoder.h"
#include "tests/unit/core/checkpoint/safetensors_hf_reference.h"
#include "tests/unit/support/user_error_support.h"

namespace ustrain {
namespace {

using namespace ustrain::hf_reference;

Recipe windowed_recipe(std::int64_t window) {
  return parse_recipe(to_toml(interop_recipe(false)), "windowed.toml",
                      {"model.sliding_window=" + std::to_string(window)});
}

// ustrain's mean next-token loss of `ids` by its decoder, one position at a time.
double decoder_loss(LlamaModel& model, Backend& be, const std::vector<std::int32_t>& ids,
                    const std::vector<std::int32_t>& targets) {
  Decoder decoder(model, be);
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  std::vector<float> logits(vocab);
  double loss = 0;
  for (std::size_t end = 1; end <= ids.size(); ++end) {
    const Tensor last = decoder.next(std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(end)));
    be.copy(Tensor(logits.data(), last.shape), last);
    double mx = -1e300, z = 0;
    for (float v : logits) mx = std::max(mx, static_cast<double>(v));
    for (float v : logits) z += std::exp(v - mx);
    loss += std::log(z) + mx - logits[static_cast<std::size_t>(targets[end - 1])];
  }
  return loss / static_cast<double>(ids.size());
}

TEST_F(HfInterop, WindowedModelExportsAsAMistralWithTheSameLoss) {
  const Recipe recipe = windowed_recipe(5);
  Model m(recipe.model);
  const std::string ckpt = save_checkpoint(recipe, m, "ckpt");
  export_checkpoint({ckpt, path("hf"), "fp32", 5'000'000'000, ""});
  const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json({"MistralForCausalLM"}));
  EXPECT_EQ(config["model_type"], "mistral");
  EXPECT_EQ(config["sliding_window"], 5);
  EXPECT_FALSE(config.contains("attention_bias")) << "MistralConfig has no attention_bias";
  const HfConfig read = read_hf_config(config.dump(), "config.json");
  EXPECT_EQ(read.layout, HfLayout::mistral);
  EXPECT_EQ(read.model, recipe.model);

  // 32 tokens, twice max_seq_len: the decoder never cuts a windowed text.
  std::vector<std::int32_t> ids, targets;
  Rng rng(3);
  for (int t = 0; t < 32; ++t) ids.push_back(static_cast<std::int32_t>(rng.next_u64() % 257));
  for (int t = 0; t < 32; ++t) targets.push_back(t + 1 < 32 ? ids[static_cast<std::size_t>(t + 1)] : 0);
  const Weights w = read_safetensors(path("hf/model.safetensors"));
  const double hf = reference_loss(w, read.model, ids, targets, /*rotate_half=*/true);
  ModelSection unwindowed = read.model;
  unwindowed.sliding_window = 0;
  const double without = reference_loss(w, unwindowed, ids, targets, /*rotate_half=*/true);
  EXPECT_NEAR(decoder_loss(m.model, *m.backend, ids, targets), hf, 1e-5 * std::abs(hf));
  EXPECT_GT(std::abs(without - hf), 1e-2) << "the test cannot tell the window from none";
  // The training forward of one max_seq_len window computes the same loss.
  const std::vector<std::int32_t> head(ids.begin(), ids.begin() + 16), next(targets.begin(), targets.begin() + 16);
  const double hf16 = reference_loss(w, read.model, head, next, /*rotate_half=*/true);
  EXPECT_NEAR(m.model.forward(*m.backend, {head, next}, 1, 16) / 16.0, hf16, 1e-5 * std::abs(hf16));
}

TEST_F(HfInterop, WindowedModelRoundTripsThroughImportAndExport) {
  const Recipe recipe = windowed_recipe(7);
  Model m(recipe.model);
  const std::string ckpt = save_checkpoint(recipe, m, "ckpt");
  export_checkpoint({ckpt, path("hf"), "fp32", 5'000'000'000, ""});
  import_hf_model({path("hf"), path("imported"), recipe, "test"});
  const Recipe imported = parse_recipe(CheckpointReader(path("imported")).manifest().recipe, "imported", {},
                                       RecipeUse::model);
  EXPECT_EQ(imported.model.sliding_window, 7);
  export_checkpoint({path("imported"), path("hf2"), "fp32", 5'000'000'000, ""});
  for (const std::string f : {"config.json", "model.safetensors"})
    EXPECT_EQ(slurp(path("hf/" + f)), slurp(path("hf2/" + f))) << f;

  // A recipe whose window differs is refused, naming both values.
  const std::string message =
      user_error_of([&] { import_hf_model({path("hf"), path("other"), windowed_recipe(4), "test"}); });
  expect_mentions(message, {"model.sliding_window = 4", "sliding_window = 7"});
}

// Mistral 7B v0.1's config.json, as published; v0.2 and later write "sliding_window": null.
const char* kMistral7B = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})";

TEST(HfMistralConfig, MistralConfigsImport) {
  const HfConfig v01 = read_hf_config(kMistral7B, "mistral/config.json");
  EXPECT_EQ(v01.layout, HfLayout::mistral);
  EXPECT_EQ(v01.model.sliding_window, 4096);
  EXPECT_EQ(v01.model.d_model, 4096);
  EXPECT_EQ(v01.model.ffn_hidden, 14336);
  EXPECT_EQ(v01.model.n_kv_heads, 8);
  EXPECT_EQ(v01.model.max_seq_len, 32768);
  EXPECT_EQ(v01.model.n_experts, 0);
  nlohmann::json v03 = nlohmann::json::parse(kMistral7B);
  v03["sliding_window"] = nullptr;
  v03["rope_theta"] = 1000000.0;
  EXPECT_EQ(read_hf_config(v03.dump(), "v03/config.json").model.sliding_window, 0);
  v03.erase("sliding_window");
  EXPECT_EQ(read_hf_config(v03.dump(), "v03/config.json").model.sliding_window, 0);
  // Mixtral's window imports too.
  nlohmann::json mixtral = nlohmann::json::parse(kMistral7B);
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  const HfConfig moe = read_hf_config(mixtral.dump(), "mixtral/config.json");
  EXPECT_EQ(moe.model.sliding_window, 4096);
  EXPECT_EQ(moe.model.n_experts, 8);
  // The exported config of the imported model says what the original did.
  const nlohmann::json back = nlohmann::json::parse(hf_config_json(v01.model, HfLayout::mistral, "bfloat16", {}));
  EXPECT_EQ(back["sliding_window"], 4096);
  EXPECT_EQ(back["architectures"], nlohmann::json({"MistralForCausalLM"}));
}

TEST(HfMistralConfig, BadWindowsAreRefusedNamingTheKey) {
  for (const char* bad : {"0", "-4096", "1.5", "\"4096\"", "true", "1e30", "18446744073709551615"}) {
    nlohmann::json c = nlohmann::json::parse(kMistral7B);
    c["sliding_window"] = nlohmann::json::parse(bad);
    const std::string message = user_error_of([&] { read_hf_config(c.dump(), "m/config.json"); });
    expect_mentions(message, {"m/config.json", "sliding_window"});
  }
}

TEST(HfMistralConfig, LayoutsThatCannotHoldAWindowAreRefused) {
  ModelSection m = windowed_recipe(5).model;
  expect_mentions(user_error_of([&] { hf_layout_for_export(m, "llama"); }), {"sliding window", "--layout mistral"});
  EXPECT_EQ(hf_layout_for_export(m, ""), HfLayout::mistral);
  m.rope_scaling = "llama3";
  expect_mentions(user_error_of([&] { hf_layout_for_export(m, ""); }), {"Mistral", "model.rope_scaling"});
  ModelSection moe = windowed_recipe(5).model;
  moe.n_experts = 4;
  EXPECT_EQ(hf_layout_for_export(moe, ""), HfLayout::mixtral);
  expect_mentions(user_error_of([&] { hf_layout_for_export(moe, "qwen2_moe"); }), {"sliding window", "Mixtral"});
  expect_mentions(user_error_of([&] { hf_layout_for_export(moe, "mistral"); }), {"mixture of experts", "Mistral"});
  // Without a window a dense model stays a Llama.
  EXPECT_EQ(hf_layout_for_export(interop_recipe(false).model, ""), HfLayout::llama);
}

}  // namespace
}  // namespace ustrain
