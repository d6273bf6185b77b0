// Import from Hugging Face safetensors: hand-written files (F32, BF16, F16, with a derived
// buffer to skip) land in the model unpermuted and exactly converted; sharded exports import
// back and export -> import -> export is byte-identical; what does not fit is refused.
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
#include "core/checkpoint/safetensors_file.h"
#include "core/interop/hf_llama.h"
#include "tests/unit/core/checkpoint/safetensors_hf_reference.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using namespace ustrain::hf_reference;
namespace fs = std::filesystem;

TEST_F(HfInterop, ExportImportExportIsBitIdenticalAndSharded) {
  const Recipe recipe = interop_recipe(false);
  Model m(recipe.model);
  const std::string ckpt = save_checkpoint(recipe, m, "ckpt");
  export_checkpoint({ckpt, path("hf"), "fp32", 2000, ""});  // ~2 kB shards: several files and an index
  const nlohmann::json index = nlohmann::json::parse(slurp(path("hf/model.safetensors.index.json")));
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  EXPECT_GT(files.size(), 2u);
  import_hf_model({path("hf"), path("imported"), recipe, "test"});
  const CheckpointReader imported(path("imported"));
  EXPECT_TRUE(imported.manifest().weights_only);
  Model back(recipe.model);
  load_model_state(imported, back.model.params(), *back.backend, /*with_optimizer=*/false);
  for (const ParamSpec& s : m.model.params().specs())
    ASSERT_EQ(std::memcmp(back.values(s.name), m.values(s.name), static_cast<std::size_t>(s.shape.numel()) * 4), 0)
        << s.name;
  export_checkpoint({path("imported"), path("hf2"), "fp32", 2000, ""});
  for (const std::string& f : files) EXPECT_EQ(slurp(path("hf/" + f)), slurp(path("hf2/" + f))) << f;
  for (const std::string f : {"config.json", "generation_config.json", "model.safetensors.index.json"})
    EXPECT_EQ(slurp(path("hf/" + f)), slurp(path("hf2/" + f))) << f;
  // The byte tokenizer's ids, not Hugging Face's defaults (bos 1, eos 2), in both files.
  for (const std::string f : {"config.json", "generation_config.json"}) {
    const nlohmann::json config = nlohmann::json::parse(slurp(path("hf/" + f)));
    EXPECT_EQ(config.at("bos_token_id"), 256) << f;
    EXPECT_EQ(config.at("eos_token_id"), 256) << f;
    EXPECT_EQ(config.at("pad_token_id"), 256) << f;
  }
  ASSERT_TRUE(imported.manifest().tokenizer.has_value());
  EXPECT_EQ(imported.manifest().tokenizer->kind, "byte");
}

// IEEE binary16 bits of a value that it represents exactly (zero or a normal number).
std::uint16_t exact_f16(float v) {
  if (v == 0.0f) return 0;
  const int e = static_cast<int>(std::floor(std::log2(v)));
  const float mantissa = v / std::ldexp(1.0f, e) - 1.0f;
  return static_cast<std::uint16_t>((e + 15) << 10 | static_cast<int>(mantissa * 1024.0f));
}

// Writes an HF-style file by hand: every tensor of `model`'s shape, element i of tensor k
// equal to k + (i mod 8) / 8, exact in F32, BF16 and F16.
void write_hf_file(const std::string& file, const ModelSection& model, const std::string& dtype, bool extra_inv_freq) {
  const LlamaModel shapes(model, 1, 1, Recompute::none);
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  int k = 0;
  for (const ParamSpec& s : shapes.params().specs()) {
    const std::size_t begin = data.size();
    for (std::int64_t i = 0; i < s.shape.numel(); ++i) {
      const float v = static_cast<float>(k) + static_cast<float>(i % 8) * 0.125f;  // exact in every dtype
      if (dtype == "F32") data.append(reinterpret_cast<const char*>(&v), 4);
      else {
        const std::uint16_t h = dtype == "BF16" ? float_to_bf16(v) : exact_f16(v);
        data.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    std::vector<std::int64_t> shape;
    for (int d = 0; d < s.shape.rank(); ++d) shape.push_back(s.shape[d]);
    header[s.name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
    ++k;
  }
  if (extra_inv_freq) {
    const std::size_t begin = data.size();
    data.append(8, '\0');
    header["model.layers.0.self_attn.rotary_emb.inv_freq"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {begin, begin + 8}}};
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  std::ofstream(file, std::ios::binary) << prefix << json << data;
}

TEST_F(HfInterop, ImportConvertsDtypesAndKeepsRowOrder) {
  const Recipe recipe = interop_recipe(false);
  for (const std::string dtype : {"F32", "BF16", "F16"}) {
    const std::string src = path(dtype + ".safetensors"), out = path(dtype + "-ckpt");
    write_hf_file(src, recipe.model, dtype, /*extra_inv_freq=*/true);
    import_hf_model({src, out, recipe, "test"});
    Model m(recipe.model);
    load_model_state(CheckpointReader(out), m.model.params(), *m.backend, false);
    int k = 0;
    for (const ParamSpec& s : m.model.params().specs()) {
      const float* v = m.values(s.name);
      for (std::int64_t i = 0; i < s.shape.numel(); ++i) {
        const float want = static_cast<float>(k) + static_cast<float>(i % 8) * 0.125f;
        ASSERT_EQ(v[i], want) << dtype << " " << s.name << "[" << i << "]: rows moved or values converted wrongly";
      }
      ++k;
    }
  }
}

TEST_F(HfInterop, ImportRefusesNonFiniteWeightsNamingTheTensor) {
  const Recipe recipe = interop_recipe(false);
  const std::string src = path("nan.safetensors");
  write_hf_file(src, recipe.model, "F32", false);
  const SafetensorsReader reader(src);
  const SafetensorsEntry& first = reader.header().entries.front();
  std::fstream file(src, std::ios::binary | std::ios::in | std::ios::out);
  const float nan = std::nanf("");
  file.seekp(static_cast<std::streamoff>(reader.header().data_offset + first.begin + 12));
  file.write(reinterpret_cast<const char*>(&nan), 4);
  file.close();
  try {
    import_hf_model({src, path("nan-ckpt"), recipe, "test"});
    ADD_FAILURE() << "NaN weights were imported";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor " + first.name + " holds a non-finite value (nan at element 3)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path("nan-ckpt")));
}

TEST_F(HfInterop, ImportRefusesWhatDoesNotFit) {
  const Recipe recipe = interop_recipe(false);
  write_hf_file(path("m.safetensors"), recipe.model, "F32", false);
  // The recipe's model is wider than the file's.
  const Recipe wider = parse_recipe(to_toml(recipe), "wider.toml", {"model.ffn_hidden=32"});
  EXPECT_THROW(import_hf_model({path("m.safetensors"), path("a"), wider, "test"}), UserError);
  // config.json disagrees with the recipe.
  fs::create_directories(path("dir"));
  fs::copy(path("m.safetensors"), path("dir/model.safetensors"));
  ModelSection other = recipe.model;
  other.rope_theta = 500000.0;
  std::ofstream(path("dir/config.json")) << llama_config_json(other, "float32", {});
  try {
    import_hf_model({path("dir"), path("b"), recipe, "test"});
    ADD_FAILURE() << "a config.json that disagrees with the recipe was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rope_theta"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path("a")));
  EXPECT_FALSE(fs::exists(path("b")));
  // A model with biases or another architecture.
  EXPECT_THROW(model_from_llama_config(R"({"model_type": "mistral"})", "c.json"), UserError);
  EXPECT_THROW(model_from_llama_config(R"({"model_type": "llama", "attention_bias": true, "hidden_size": 8,
      "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 5})", "c.json"),
               UserError);
}

// A Llama 3.2-style config.json (rope_scaling of type llama3, several EOS ids, a tokenizer
// ustrain does not read) imports, and exports back with the same scaling.
TEST_F(HfInterop, Llama3RopeScalingRoundTripsThroughImportAndExport) {
  Recipe recipe = interop_recipe(false);
  recipe.data.path.clear();  // ckpt import needs no dataset
  const nlohmann::json scaling = {{"factor", 32.0}, {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                                  {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}};
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                           {"hidden_size", 16}, {"intermediate_size", 24}, {"num_hidden_layers", 2},
                           {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 4},
                           {"vocab_size", 257}, {"max_position_embeddings", 16}, {"rms_norm_eps", 1e-5},
                           {"rope_theta", 100.0}, {"rope_scaling", scaling}, {"tie_word_embeddings", false},
                           {"hidden_act", "silu"}, {"bos_token_id", 250}, {"eos_token_id", {251, 252}},
                           {"torch_dtype", "bfloat16"}};
  const ModelSection read = model_from_llama_config(config.dump(), "config.json");
  EXPECT_EQ(read.rope_scaling, "llama3");
  EXPECT_EQ(read.rope_scaling_factor, 32.0);
  EXPECT_EQ(read.rope_low_freq_factor, 1.0);
  EXPECT_EQ(read.rope_high_freq_factor, 4.0);
  EXPECT_EQ(read.rope_original_max_seq_len, 8192);

  fs::create_directories(path("llama3"));
  write_hf_file(path("llama3/model.safetensors"), recipe.model, "BF16", false);
  std::ofstream(path("llama3/config.json")) << config.dump(2);
  // The recipe must say the same scaling: without it the model would compute other numbers.
  EXPECT_THROW(import_hf_model({path("llama3"), path("unscaled"), recipe, "test"}), UserError);
  recipe.model.rope_scaling = "llama3";
  recipe.model.rope_scaling_factor = 32.0;
  recipe.model.rope_low_freq_factor = 1.0;
  recipe.model.rope_high_freq_factor = 4.0;
  recipe.model.rope_original_max_seq_len = 8192;
  import_hf_model({path("llama3"), path("imported"), recipe, "test"});
  const CheckpointReader imported(path("imported"));
  ASSERT_TRUE(imported.manifest().tokenizer.has_value());
  EXPECT_EQ(imported.manifest().tokenizer->kind, "external");  // the config's list of EOS ids is not read

  export_checkpoint({path("imported"), path("exported"), "bf16", 5'000'000'000, ""});
  const nlohmann::json back = nlohmann::json::parse(slurp(path("exported/config.json")));
  EXPECT_EQ(back.at("rope_scaling"), scaling);
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings", "rope_theta",
                          "rms_norm_eps", "tie_word_embeddings", "torch_dtype"})
    EXPECT_EQ(back.at(key), config.at(key)) << key;
  import_hf_model({path("exported"), path("again"), recipe, "test"});

  // Other scaling types are refused by name.
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  try {
    model_from_llama_config(config.dump(), "yarn.json");
    ADD_FAILURE() << "yarn scaling was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("\"yarn\""), std::string::npos) << e.what();
  }
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_THROW(model_from_llama_config(config.dump(), "partial.json"), UserError);
}

}  // namespace
}  // namespace ustrain
