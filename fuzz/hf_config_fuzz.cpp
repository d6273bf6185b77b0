// A Hugging Face config.json (Llama, Mixtral or Qwen2-MoE), as `ckpt import` reads it. One that
// reads must read again, to the same model, once written as ustrain's export writes it.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/interop/hf_llama.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ustrain::HfConfig config;
  ustrain::HfTokenIds ids;
  try {
    ids = ustrain::token_ids_from_llama_config(text, "config.json");
    config = ustrain::read_hf_config(text, "config.json");
  } catch (const ustrain::UserError&) {
    return 0;
  }
  std::string written;
  try {
    written = ustrain::hf_config_json(config.model, config.layout, "float32", ids);
  } catch (const ustrain::UserError&) {  // a model this layout cannot hold
    return 0;
  }
  const ustrain::HfConfig again = ustrain::read_hf_config(written, "config.json");
  if (!(again.model == config.model) || again.layout != config.layout) std::abort();
  if (!(ustrain::token_ids_from_llama_config(written, "config.json") == ids)) std::abort();
  return 0;
}
