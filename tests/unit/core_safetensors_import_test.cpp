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
#include "core/rng.h"
#include "core/interop/safetensors_dtype.h"
#include "core/interop/safetensors_file.h"
#include "core/interop/hf_llama.h"
#include "core_safetensors_hf_reference.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using namespace ustrain::hf_reference;
namespace fs = std::filesystem;

TEST_F(HfInterop, ExportImportExportIsBitIdenticalAndSharded) {
  const Recipe recipe = interop_recipe(false);
  Model m(recipe.model);
  const std::string ckpt = save_checkpoint(recipe, m, "ckpt");
  export_checkpoint({ckpt, path("hf"), "fp32", 2000});  // ~2 kB shards: several files and an index
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
  export_checkpoint({path("imported"), path("hf2"), "fp32", 2000});
  for (const std::string& f : files) EXPECT_EQ(slurp(path("hf/" + f)), slurp(path("hf2/" + f))) << f;
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
  std::ofstream(path("dir/config.json")) << llama_config_json(other, "float32", std::nullopt, std::nullopt);
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

}  // namespace
}  // namespace ustrain
