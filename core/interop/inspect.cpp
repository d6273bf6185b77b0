#include "core/interop/inspect.h"

#include <fmt/format.h>

#include <cmath>

#include "core/checkpoint/fs.h"
#include "core/checkpoint/locate.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/safetensors_file.h"
#include "core/interop/hf_llama.h"

namespace ustrain {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// The [model] section of a resolved recipe, as to_toml writes it.
std::string model_section(const ModelSection& model) {
  Recipe r;
  r.model = model;
  const std::string toml = to_toml(r);
  const std::size_t begin = toml.find("[model]");
  const std::size_t end = toml.find("\n[", begin);
  return toml.substr(begin, end - begin + 1);
}

std::string inspect_hf(const std::string& path) {
  const HfModelFiles hf = locate_hf_model(path);
  std::string out = fmt::format("Hugging Face safetensors model: {} file(s)\n", hf.files.size());
  std::int64_t total = 0;
  for (const std::string& f : hf.files) {
    const SafetensorsReader reader(f);
    out += fmt::format("\n{} ({} tensors)\n", f, reader.header().entries.size());
    for (const SafetensorsEntry& e : reader.header().entries) {
      out += fmt::format("  {:<52} {:<5} {}\n", e.name, e.dtype, shape_text(e.shape));
      total += e.numel();
    }
  }
  out += fmt::format("\nparameters: {} ({:.2f} M)\n", total, static_cast<double>(total) / 1e6);
  if (hf.config) {
    const ModelSection m = model_from_llama_config(read_text_file(*hf.config), *hf.config);
    out += fmt::format("\nrecipe section for this model (from {}):\n{}", *hf.config, model_section(m));
  }
  return out;
}

}  // namespace

std::string inspect(const std::string& path) {
  if (is_hf_model(path)) return inspect_hf(path);
  const CheckpointReader checkpoint(locate_checkpoint(path));
  const CheckpointManifest& m = checkpoint.manifest();
  std::string out = fmt::format("checkpoint {}\n", checkpoint.dir());
  out += fmt::format("  format version {} | ustrain {} | backend: {}\n", m.format_version, m.ustrain_version,
                     m.backend);
  out += fmt::format("  step {} | tokens seen {} | lr {} | loss {} | loss scale {}{}\n", m.step, m.tokens_seen, m.lr,
                     std::isfinite(m.loss) ? fmt::format("{:.6f}", m.loss) : "-", m.loss_scale,
                     m.weights_only ? " | weights only" : "");
  out += fmt::format("  mesh {} | recipe hash {}\n", m.mesh.str(), m.recipe_hash);
  out += fmt::format("  tokenizer: {}\n", m.tokenizer ? m.tokenizer->describe()
                                                     : std::string("not kept (an older checkpoint: found through its "
                                                                   "recipe's [data])"));
  for (const CheckpointFile& f : m.files)
    out += fmt::format("  rank {}: {} ({} bytes, {} entries){}\n", f.rank, f.name, f.bytes, f.checksums.size(),
                       f.data_state.empty() ? "" : ", data position " + f.data_state);
  std::int64_t total = 0;
  out += "\ntensors:\n";
  for (const CheckpointTensor& t : m.tensors) {
    out += fmt::format("  {:<52} {:<16} {}\n", t.name, shape_text(t.shape), fmt::join(t.states, " "));
    total += numel(t.shape);
  }
  out += fmt::format("\nparameters: {} ({:.2f} M)\n\nrecipe:\n{}", total, static_cast<double>(total) / 1e6, m.recipe);
  return out;
}

}  // namespace ustrain
