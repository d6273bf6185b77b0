#include "core/generate.h"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "core/checkpoint_locate.h"
#include "core/checkpoint_reader.h"
#include "core/model/llama.h"
#include "core/rng.h"
#include "core/sampler.h"
#include "data/byte_tokenizer.h"

namespace ustrain {

std::string generate_text(const GenerateOptions& o, const std::function<void(const std::string&)>& on_text) {
  if (!o.run_dir.empty() && !std::filesystem::is_directory(o.run_dir + "/checkpoints"))
    throw UserError(fmt::format("{} is not a run directory (it has no checkpoints/); pass the run directory that "
                                "`ustrain train` wrote, e.g. runs/quickstart",
                                o.run_dir));
  const CheckpointReader checkpoint(locate_checkpoint(o.run_dir.empty() ? o.checkpoint : o.run_dir));
  const Recipe recipe = parse_recipe(checkpoint.manifest().recipe, checkpoint.dir() + "/" + kManifestName);
  if (recipe.data.tokenizer != "byte")
    throw UserError(fmt::format("generate supports the byte tokenizer; the run uses \"{}\"", recipe.data.tokenizer));
  if (o.tokens < 1) throw UserError("--tokens must be at least 1");

  const std::int64_t context = recipe.model.max_seq_len;
  LlamaModel model(recipe.model, 1, context, Recompute::none);
  MemoryPlan plan;
  model.plan(plan);
  auto backend = make_backend(recipe.device.type == "cuda" ? Device::cuda : Device::cpu,
                              static_cast<int>(recipe.device.threads));
  PlannedMemory memory(plan, *backend);
  model.bind(memory, *backend);
  load_model_state(checkpoint, model.params(), *backend, /*with_optimizer=*/false);

  const ByteTokenizer tokenizer;
  std::vector<std::int32_t> ids = tokenizer.encode(o.prompt);
  if (ids.empty()) ids.push_back(ByteTokenizer::kEos);  // an empty prompt starts a new document
  const SamplingConfig sampling{o.temperature, o.top_k};
  Rng rng(o.seed);
  std::vector<float> logits(static_cast<std::size_t>(recipe.model.vocab_size));
  std::vector<std::int32_t> window, no_targets;
  std::vector<std::int32_t> generated;
  std::string text;
  for (std::int64_t i = 0; i < o.tokens; ++i) {
    const std::size_t start = ids.size() > static_cast<std::size_t>(context) ? ids.size() - static_cast<std::size_t>(context) : 0;
    window.assign(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end());
    const auto s = static_cast<std::int64_t>(window.size());
    no_targets.assign(window.size(), -1);
    model.forward(*backend, window.data(), no_targets.data(), 1, s);
    const Tensor last = model.logits().slice(s - 1, s);  // (1, V)
    backend->copy(Tensor(logits.data(), last.shape), last);
    // Sample only real tokens: the model's vocabulary may be padded past the tokenizer's.
    const std::int32_t next = sample_token(logits.data(), ByteTokenizer::kVocabSize, sampling, rng.uniform());
    if (next == ByteTokenizer::kEos && o.stop_at_eos) break;
    ids.push_back(next);
    generated.push_back(next);
    // Bytes of a UTF-8 character may arrive one by one: emit only whole characters.
    std::string piece = tokenizer.decode(generated);
    std::size_t complete = piece.size();
    while (complete > 0 && (static_cast<unsigned char>(piece[complete - 1]) & 0xC0) == 0x80) --complete;
    if (complete > 0 && static_cast<unsigned char>(piece[complete - 1]) >= 0xC0) --complete;
    if (complete > 0) {
      const std::string out = piece.substr(0, complete);
      text += out;
      if (on_text) on_text(out);
      generated.erase(generated.begin(), generated.begin() + static_cast<std::ptrdiff_t>(complete));
    }
  }
  const std::string rest = tokenizer.decode(generated);
  text += rest;
  if (on_text && !rest.empty()) on_text(rest);
  return text;
}

}  // namespace ustrain
