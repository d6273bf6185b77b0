// Test support for the Hugging Face interop tests: a safetensors reader and float64 Llama,
// Mixtral and Qwen2-MoE forwards, written here from the specifications and Hugging Face's
// model definitions (not from ustrain's code), and a fixture
// that saves a checkpoint of a small model with large random weights.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint/writer.h"
#include "core/model/llama.h"
#include "core/recipe/recipe.h"

namespace ustrain::hf_reference {

// A recipe for a 2-layer, 16-wide model with grouped-query attention (4 heads, 2 kv heads).
Recipe interop_recipe(bool tied);
std::string slurp(const std::string& path);

// Every tensor of a safetensors file (F32 or BF16) as doubles, parsed from the raw bytes;
// checks offsets, sizes, alignment and the "format": "pt" metadata with gtest expectations.
std::map<std::string, std::vector<double>> read_safetensors(const std::string& path,
                                                            std::string* dtype_out = nullptr);

// Mean next-token loss of a Llama model under Hugging Face's definition, in float64, RoPE
// scaling of type llama3 and Mistral's sliding window (m.sliding_window) included.
// `rotate_half` selects Hugging Face's RoPE layout; false gives the interleaved (GPT-J) one.
using Weights = std::map<std::string, std::vector<double>>;
double reference_loss(const Weights& w, const ModelSection& m, const std::vector<std::int32_t>& ids,
                      const std::vector<std::int32_t>& targets, bool rotate_half);
// The same model's logits (V each) at every position of `ids`, positions 0 .. n - 1.
std::vector<std::vector<double>> reference_logits(const Weights& w, const ModelSection& m,
                                                  const std::vector<std::int32_t>& ids);

// The same for a mixture of experts in the Hugging Face Mixtral or Qwen2-MoE definition
// (config.json's model_type; sliding_window honoured), from the weights and config.json alone: MixtralSparseMoeBlock
// (softmax over all experts, top-k renormalised, experts w2(silu(w1 h) * w3 h)), and
// Qwen2-MoE's q/k/v biases, Qwen2MoeSparseMoeBlock (top-k renormalised when norm_topk_prob,
// plus sigmoid(shared_expert_gate h) x shared_expert(h)) in the layers decoder_sparse_step
// and mlp_only_layers make sparse, Qwen2MoeMLP elsewhere. `routing_gap` receives the least
// distance between a token's k-th and (k+1)-th expert probability: far above float32's
// errors, the routing cannot flip between implementations.
double reference_moe_loss(const Weights& w, const nlohmann::json& config, const std::vector<std::int32_t>& ids,
                          const std::vector<std::int32_t>& targets, double* routing_gap);

class HfInterop : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  struct Model {
    std::unique_ptr<Backend> backend = make_backend(Device::cpu, 1);
    LlamaModel model;
    MemoryPlan plan;
    std::unique_ptr<PlannedMemory> memory;
    explicit Model(const ModelSection& m);
    const float* values(const std::string& name) const;
  };

  // A checkpoint (step 5) of `recipe`'s model with large random weights, so that attention
  // depends on position; returns its directory.
  std::string save_checkpoint(const Recipe& recipe, Model& m, const std::string& name);

  std::filesystem::path dir_;
};

}  // namespace ustrain::hf_reference
