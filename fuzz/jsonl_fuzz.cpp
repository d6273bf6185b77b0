// A JSONL corpus file, plain or (told by its first bytes) gzip- or zstd-compressed, as
// `data convert --format jsonl` reads it: the decompression and every line's JSON.
#include <cstdint>

#include "data/inputs/text_documents.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ustrain::fuzz::write_scratch("corpus.jsonl", data, size);
  ustrain::fuzz::NullSink sink;
  try {
    ustrain::read_jsonl_files({ustrain::InputFile{path, size, false}}, "text", ustrain::kDefaultMaxDocumentBytes, sink);
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
