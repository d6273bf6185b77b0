// A tiktoken rank file (cl100k_base's pattern), as `data convert --tokenizer FILE.tiktoken`
// reads it: one that converts must load as a tokenizer.json and encode and decode text.
#include <cstdint>
#include <string>

#include "data/tokenizers/hf_tokenizer.h"
#include "data/tokenizers/tiktoken_file.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ustrain::fuzz::write_scratch("cl100k_base.tiktoken", data, size);
  try {
    const ustrain::HfTokenizer tokenizer(ustrain::tiktoken_to_tokenizer_json(path, {}), path);
    for (const char* text : {"Hello world's 123  \n\t", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC <|endoftext|>", "\xFF\xC3"}) {
      const auto ids = tokenizer.encode(text);
      tokenizer.decode(ids);
    }
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
