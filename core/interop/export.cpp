#include "core/interop/interop.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "core/checkpoint/fs.h"
#include "core/checkpoint/locate.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/safetensors_dtype.h"
#include "core/checkpoint/safetensors_file.h"
#include "core/checkpoint/tokenizer.h"
#include "core/interop/hf_llama.h"
#include "core/interop/hf_layout.h"
#include "core/interop/hf_tokenizer.h"
#include "data/files/durable_output.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

struct ExportShard {
  std::vector<SafetensorsEntry> entries;  // under their Hugging Face names
  std::vector<HfTensor> sources;          // where the same tensors' values come from
  std::uint64_t bytes = 0;
};

// Greedy split in model order: a shard closes before the tensor that would overflow it.
std::vector<ExportShard> plan_shards(const CheckpointManifest& m, const ModelSection& model, HfLayout layout,
                                     const std::string& dtype, std::uint64_t max_bytes) {
  ParamShapes params;
  for (const CheckpointTensor& t : m.tensors) params.emplace_back(t.name, t.shape);
  std::vector<ExportShard> shards(1);
  for (const HfTensor& t : hf_tensors(params, model, layout)) {
    SafetensorsEntry e{t.name, dtype, t.shape, 0, 0};
    const std::uint64_t bytes = static_cast<std::uint64_t>(e.numel()) * safetensors_dtype_size(dtype);
    if (!shards.back().entries.empty() && shards.back().bytes + bytes > max_bytes) shards.emplace_back();
    shards.back().entries.push_back(e);
    shards.back().sources.push_back(t);
    shards.back().bytes += bytes;
  }
  for (ExportShard& s : shards) lay_out_entries(s.entries);
  return shards;
}

}  // namespace

InteropReport export_checkpoint(const ExportOptions& o) {
  if (o.dtype != "fp32" && o.dtype != "bf16")
    throw UserError(fmt::format("--dtype {} is not supported; use fp32 or bf16", o.dtype));
  const CheckpointReader checkpoint(locate_checkpoint(o.checkpoint));
  const CheckpointManifest& m = checkpoint.manifest();
  const Recipe recipe = parse_recipe(m.recipe, checkpoint.dir() + "/" + kManifestName, {}, RecipeUse::model);
  // The weights are worth exporting even when an older checkpoint's tokenizer is lost.
  std::optional<TokenizerSnapshot> tokenizer;
  std::string tokenizer_problem;
  try {
    tokenizer = checkpoint_tokenizer(checkpoint);
  } catch (const UserError& e) {
    tokenizer_problem = e.what();
  }
  const bool bf16 = o.dtype == "bf16";
  // The layout first: a model it cannot hold is refused before anything is written.
  const HfLayout layout = hf_layout_for_export(recipe.model, o.layout);
  const HfTokenIds ids = tokenizer ? hf_token_ids(*tokenizer) : HfTokenIds{};
  const std::string config = hf_config_json(recipe.model, layout, bf16 ? "bfloat16" : "float32", ids);
  const std::vector<ExportShard> shards =
      plan_shards(m, recipe.model, layout, bf16 ? "BF16" : "F32", o.max_shard_bytes);

  StagedDirectory out(o.output_dir);
  InteropReport report;
  report.output_dir = o.output_dir;
  report.files = static_cast<int>(shards.size());
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::vector<float> values;
  std::vector<std::uint16_t> halves;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shards.size() == 1 ? "model.safetensors"
                                                : fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, shards.size());
    SafetensorsWriter writer(out.path() + "/" + name, shards[i].entries, {{"format", "pt"}});
    for (std::size_t t = 0; t < shards[i].entries.size(); ++t) {
      const SafetensorsEntry& e = shards[i].entries[t];
      const HfTensor& source = shards[i].sources[t];
      values.assign(static_cast<std::size_t>(e.numel()), 0.0f);  // a tensor ustrain lacks is zeros
      if (!source.param.empty()) checkpoint.read(kStateParam, source.param, Slice::whole(e.shape), values.data());
      if (source.scale != 1.0f)
        for (float& v : values) v *= source.scale;  // a power of two: exact, and so is bf16's rounding of it
      if (bf16) {
        halves.resize(values.size());
        for (std::size_t k = 0; k < values.size(); ++k) halves[k] = float_to_bf16(values[k]);
        writer.write(halves.data(), halves.size() * sizeof(std::uint16_t));
      } else {
        writer.write(values.data(), values.size() * sizeof(float));
      }
      weight_map[e.name] = name;
      ++report.tensors;
    }
    writer.finish();
    report.bytes += shards[i].bytes;
  }
  if (shards.size() > 1) {
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", report.bytes}}}, {"weight_map", weight_map}};
    write_text_file(out.path() + "/model.safetensors.index.json", index.dump(2) + "\n");
  }
  write_text_file(out.path() + "/config.json", config);
  write_text_file(out.path() + "/generation_config.json", generation_config_json(ids));
  if (tokenizer) {
    report.tokenizer_files = write_hf_tokenizer_files(out.path(), *tokenizer, recipe.model.max_seq_len);
    report.tokenizer = tokenizer->identity.describe();
  } else {
    report.tokenizer = "none: " + tokenizer_problem;
  }
  out.commit();
  return report;
}

}  // namespace ustrain
