// A Hugging Face tokenizer.json, as `data convert --tokenizer`, checkpoints and `ckpt import`
// read it: a file that loads must encode and decode text of every kind without crashing.
#include <cstdint>
#include <string>

#include "data/tokenizers/hf_tokenizer.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const ustrain::HfTokenizer tokenizer(std::string(reinterpret_cast<const char*>(data), size), "tokenizer.json");
    for (const char* text : {"Hello world's 123  \n\t", "caf\xC3\xA9 e\xCC\x81 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
                             "\xFF\xC3 <|endoftext|></s>", ""}) {
      const auto ids = tokenizer.encode(text);
      tokenizer.decode(ids);
      for (std::int32_t id : ids) tokenizer.piece(id);
    }
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
