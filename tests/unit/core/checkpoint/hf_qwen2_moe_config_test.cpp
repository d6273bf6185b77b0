// Qwen2-MoE's config.json: which layers are MoE (decoder_sparse_step, mlp_only_layers) against
// ustrain's model.first_dense_layers and model.moe_layer_interval, the shared expert's width,
// and what ustrain refuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/interop/hf_layout.h"
#include "core/interop/hf_llama.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

ModelSection moe_model() {
  ModelSection m;
  m.vocab_size = 100;
  m.d_model = 16;
  m.n_layers = 6;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn_hidden = 32;
  m.n_experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn_hidden = 8;
  m.n_shared_experts = 3;
  m.shared_expert_ffn_hidden = 4;
  return m;
}

nlohmann::json qwen_config(const ModelSection& m) {
  return nlohmann::json::parse(hf_config_json(m, HfLayout::qwen2_moe, "float32", {}));
}

TEST(HfQwen2MoeConfig, EveryLayerPatternRoundTrips) {
  for (const auto& [first, interval] : {std::pair{0, 1}, {2, 1}, {0, 2}, {1, 2}, {1, 3}, {5, 1}}) {
    ModelSection m = moe_model();
    m.first_dense_layers = first;
    m.moe_layer_interval = interval;
    const nlohmann::json c = qwen_config(m);
    EXPECT_EQ(c["decoder_sparse_step"], 1);
    const HfConfig read = read_hf_config(c.dump(), "config.json");
    EXPECT_EQ(read.layout, HfLayout::qwen2_moe);
    EXPECT_TRUE(read.qkv_bias);
    EXPECT_EQ(moe_layers(read.model), moe_layers(m)) << first << " " << interval;
    EXPECT_EQ(read.model.n_shared_experts * read.model.shared_expert_ffn_hidden, 12);
    EXPECT_EQ(c["shared_expert_intermediate_size"], 12);
    EXPECT_EQ(read.model.expert_ffn_hidden, 8);
    EXPECT_EQ(read.model.ffn_hidden, 32);
  }
}

TEST(HfQwen2MoeConfig, ReadsHuggingFacesOwnPatterns) {
  nlohmann::json c = qwen_config(moe_model());
  c["mlp_only_layers"] = nlohmann::json::array();
  c["decoder_sparse_step"] = 2;  // layers 1, 3, 5
  ModelSection m = read_hf_config(c.dump(), "config.json").model;
  EXPECT_EQ(m.first_dense_layers, 1);
  EXPECT_EQ(m.moe_layer_interval, 2);
  c["mlp_only_layers"] = {1};  // 3, 5
  m = read_hf_config(c.dump(), "config.json").model;
  EXPECT_EQ(moe_layers(m), (std::vector<std::int64_t>{3, 5}));
  c["mlp_only_layers"] = {3};  // 1, 5: the first dense, then every 4th
  m = read_hf_config(c.dump(), "config.json").model;
  EXPECT_EQ(moe_layers(m), (std::vector<std::int64_t>{1, 5}));
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = {0, 2};  // 1, 3, 4, 5: no first-dense-then-every-n-th pattern
  EXPECT_THROW(read_hf_config(c.dump(), "config.json"), UserError);
  c["decoder_sparse_step"] = 2;
  c.erase("mlp_only_layers");  // absent: none
  c["qkv_bias"] = false;
  EXPECT_EQ(moe_layers(read_hf_config(c.dump(), "config.json").model), (std::vector<std::int64_t>{1, 3, 5}));
  EXPECT_FALSE(read_hf_config(c.dump(), "config.json").qkv_bias);
  c["norm_topk_prob"] = false;
  EXPECT_FALSE(read_hf_config(c.dump(), "config.json").model.router_renormalize);
}

// Newer transformers versions write rope_parameters instead of rope_theta.
TEST(HfQwen2MoeConfig, ReadsRopeThetaFromRopeParameters) {
  nlohmann::json c = qwen_config(moe_model());
  c.erase("rope_theta");
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  EXPECT_EQ(read_hf_config(c.dump(), "config.json").model.rope_theta, 1000000.0);
  c["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_THROW(read_hf_config(c.dump(), "config.json"), UserError);
}

TEST(HfQwen2MoeConfig, RefusesWhatUstrainCannotHold) {
  nlohmann::json c = qwen_config(moe_model());
  c["use_sliding_window"] = true;
  EXPECT_THROW(read_hf_config(c.dump(), "config.json"), UserError);
  c = qwen_config(moe_model());
  c["mlp_only_layers"] = {0, 1, 2, 3, 4, 5};
  EXPECT_THROW(read_hf_config(c.dump(), "config.json"), UserError);

  ModelSection sigmoid = moe_model();
  sigmoid.router_score = "sigmoid";
  EXPECT_THROW(hf_layout_for_export(sigmoid, "qwen2_moe"), UserError);
  ModelSection biased = moe_model();
  biased.router_bias_update_rate = 0.001;
  EXPECT_THROW(hf_layout_for_export(biased, "qwen2_moe"), UserError);
  EXPECT_THROW(hf_layout_for_export(moe_model(), "mixtral"), UserError);  // shared experts
  EXPECT_EQ(hf_layout_for_export(moe_model(), "qwen2_moe"), HfLayout::qwen2_moe);
  EXPECT_THROW(hf_layout_for_export(moe_model(), "llama"), UserError);
  ModelSection dense = moe_model();
  dense.n_experts = 0;
  EXPECT_EQ(hf_layout_for_export(dense, ""), HfLayout::llama);
  EXPECT_THROW(hf_layout_for_export(dense, "qwen2_moe"), UserError);
}

// Integers written as floats or beyond int64 (which nlohmann would convert with undefined
// behaviour), and layer counts past model.n_layers's bound, are refused naming the key.
TEST(HfConfigIntegers, AreCheckedBeforeUse) {
  const auto message = [](const nlohmann::json& c) -> std::string {
    try {
      read_hf_config(c.dump(), "config.json");
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  const nlohmann::json good = qwen_config(moe_model());
  ASSERT_EQ(message(good), "");
  const std::pair<const char*, nlohmann::json> bad[] = {
      {"hidden_size", 1e30},          {"hidden_size", 16.0},   {"num_hidden_layers", 1000000000000},
      {"num_experts", -1},            {"vocab_size", "100"},   {"num_key_value_heads", 18446744073709551615u},
      {"decoder_sparse_step", 0},     {"mlp_only_layers", {0.5}}, {"head_dim", 4.5},
  };
  for (const auto& [key, value] : bad) {
    nlohmann::json c = good;
    c[key] = value;
    EXPECT_NE(message(c).find(key), std::string::npos) << key << " = " << value.dump() << ": " << message(c);
  }
}

}  // namespace
}  // namespace ustrain
