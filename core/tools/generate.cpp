#include "core/tools/generate.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/checkpoint/locate.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/tokenizer.h"
#include "core/step/model_instance.h"
#include "core/step/router_balance.h"
#include "core/model/rng.h"
#include "core/tools/decoder.h"
#include "core/tools/sampler.h"
#include "data/tokenizers/tokenizer.h"
#include "kernels/cpu/cpu_backend.h"

namespace ustrain {

GeneratedText generate_text(const GenerateOptions& o, const std::function<void(const std::string&)>& on_text) {
  const CheckpointReader checkpoint(o.run_dir.empty() ? locate_checkpoint(o.checkpoint)
                                                     : locate_run_checkpoint(o.run_dir));
  const Recipe recipe =
      parse_recipe(checkpoint.manifest().recipe, checkpoint.dir() + "/" + kManifestName, {}, RecipeUse::model);
  if (o.tokens < 1) throw UserError("--tokens must be at least 1");

  // The tokenizer first: a missing or damaged one is reported before the weights are loaded.
  const std::unique_ptr<Tokenizer> tokenizer =
      make_tokenizer(checkpoint_tokenizer(checkpoint), "checkpoint " + checkpoint.dir());
  const std::int64_t context = recipe.model.max_seq_len;
  ModelInstance instance(recipe, ModelGeometry::of(recipe.model, {}, context), 1, Recompute::none);
  LlamaModel& model = instance.model;
  Backend& backend = *instance.backend;
  load_model_state(checkpoint, model.params(), backend, /*with_optimizer=*/false, model_state_of(model, backend, false));

  if (tokenizer->vocab_size() > recipe.model.vocab_size)
    throw UserError(fmt::format("the tokenizer has {} tokens but the checkpoint's model only {}",
                                tokenizer->vocab_size(), recipe.model.vocab_size));
  std::vector<std::int32_t> ids = tokenizer->encode(o.prompt);
  if (ids.empty() && tokenizer->eos_id() >= 0) ids.push_back(tokenizer->eos_id());  // start a new document
  if (ids.empty()) throw UserError("--prompt is required: this tokenizer has no end-of-document token to start from");
  const SamplingConfig sampling{o.temperature, o.top_k};
  Rng rng(o.seed);
  std::vector<float> logits(static_cast<std::size_t>(recipe.model.vocab_size));
  std::vector<std::uint16_t> narrow;  // bf16/fp16 logits on their way to the host
  CpuBackend widen(1);
  std::vector<std::int32_t> generated;
  GeneratedText result;
  result.context = context;
  std::string& text = result.text;  // what has been handed to on_text so far
  const auto emit = [&](bool final) {
    const std::string all = tokenizer->decode(generated);
    std::size_t complete = all.size();
    if (!final) {
      // The last character may still be arriving byte by byte: hold back an incomplete
      // UTF-8 sequence (continuation bytes and the lead byte that starts them).
      std::size_t lead = complete;
      while (lead > 0 && (static_cast<unsigned char>(all[lead - 1]) & 0xC0) == 0x80) --lead;
      if (lead > 0 && static_cast<unsigned char>(all[lead - 1]) >= 0xC0) {
        const auto c = static_cast<unsigned char>(all[lead - 1]);
        const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (complete - (lead - 1) < need) complete = lead - 1;
      }
    }
    if (complete > text.size()) {
      const std::string piece = all.substr(text.size(), complete - text.size());
      text += piece;
      if (on_text) on_text(piece);
    }
  };
  Decoder decoder(model, backend);
  for (std::int64_t i = 0; i < o.tokens; ++i) {
    const Tensor last = decoder.next(ids);  // (1, V)
    if (decoder.windowed()) ++result.past_context;  // the window slides: the oldest tokens drop out
    if (last.dtype == DType::f32) {
      backend.copy(Tensor(logits.data(), last.shape), last);
    } else {  // mixed precision: the logits come over in the compute dtype and widen here
      narrow.resize(logits.size());
      const Tensor host_narrow(narrow.data(), last.shape, last.dtype);
      backend.copy(host_narrow, last);
      widen.convert(Tensor(logits.data(), last.shape), host_narrow);
    }
    // Sample only real tokens: the model's vocabulary may be padded past the tokenizer's.
    const std::int32_t next = sample_token(logits.data(), tokenizer->vocab_size(), sampling, rng.uniform());
    if (next == tokenizer->eos_id() && o.stop_at_eos) break;
    ids.push_back(next);
    generated.push_back(next);
    emit(false);
  }
  emit(true);
  return result;
}

}  // namespace ustrain
