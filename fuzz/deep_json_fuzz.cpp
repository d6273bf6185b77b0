// JSON nested to any depth, through every reader of a JSON file ustrain does not write itself.
// The first byte picks the reader (and arrays or objects for the nesting), the next two a depth
// of up to 32,640 levels (the second byte scales the first by a power of two, so that most
// inputs stay near the limit of 256 and cheap, and some go deep enough to overflow the stack of
// code that recursed over them under AddressSanitizer); the rest is the document, with the
// nesting put in at its first '@'. Mutating a 64 KiB input would rarely nest that deep. Each
// reader must answer with a result or one UserError: never a crash (a stack overflow included)
// nor another exception.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/checkpoint/format.h"
#include "core/eval/task_file.h"
#include "core/interop/hf_llama.h"
#include "core/checkpoint/safetensors.h"
#include "core/plan/calibration.h"
#include "core/trace/chrome_trace.h"
#include "data/tokenizers/byte_tokenizer.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/files/json_input.h"
#include "data/shards/manifest.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

namespace {

using ustrain::fuzz::write_scratch;

// `text` with `depth` nested arrays (or objects) in place of its first '@'.
std::string nest(std::string_view text, std::size_t depth, bool objects) {
  const std::size_t at = text.find('@');
  if (at == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, at));
  out.reserve(text.size() + depth * 7);
  for (std::size_t i = 0; i < depth; ++i) out += objects ? "{\"a\":" : "[";
  out += "0";
  for (std::size_t i = 0; i < depth; ++i) out += objects ? "}" : "]";
  out += text.substr(at + 1);
  return out;
}

const std::uint8_t* bytes_of(const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }

// Reads `json` as the reader numbered `which` reads its file.
void read_as(int which, const std::string& json) {
  switch (which) {
    case 0: (void)ustrain::read_hf_config(json, "config.json"); break;
    case 1: (void)ustrain::token_ids_from_llama_config(json, "config.json"); break;
    case 2: (void)ustrain::decode_safetensors_header(json, "model.safetensors"); break;
    case 3: (void)ustrain::manifest_from_json(json, "manifest.json"); break;
    case 4: (void)ustrain::file_record_from_json(json, "rank-00000.json"); break;
    case 5: ustrain::HfTokenizer(json, "tokenizer.json").encode("Hello, world 123"); break;
    case 6: (void)ustrain::read_manifest(write_scratch("manifest.json", bytes_of(json), json.size())); break;
    case 7: (void)ustrain::read_calibration(write_scratch("calibration.json", bytes_of(json), json.size())); break;
    case 8:
      (void)ustrain::locate_hf_model(write_scratch("model.safetensors.index.json", bytes_of(json), json.size()));
      break;
    case 9:
      (void)ustrain::load_task(write_scratch("task.jsonl", bytes_of(json), json.size()), ustrain::ByteTokenizer(), 64);
      break;
    case 10: (void)ustrain::merge_chrome_traces({json}); break;
    default:
      try {
        (void)ustrain::parse_json(json, "input.json");
      } catch (const nlohmann::json::exception&) {  // a syntax error, for the caller to word
      }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const int which = (data[0] & 0x7f) % 12;
  const std::size_t depth = std::size_t{data[1]} << (data[2] % 8);
  const std::string json = nest(std::string_view(reinterpret_cast<const char*>(data) + 3, size - 3), depth,
                                (data[0] & 0x80) != 0);
  try {
    read_as(which, json);
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
