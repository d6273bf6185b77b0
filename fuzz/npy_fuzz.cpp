// A NumPy .npy token array: its header, then its tokens as `data convert` reads them.
#include <cstdint>

#include "data/inputs/npy_format.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ustrain::fuzz::write_scratch("tokens.npy", data, size);
  ustrain::fuzz::NullSink sink;
  try {
    ustrain::read_npy({ustrain::InputFile{path, size, false}}, /*vocab_size=*/50304, /*eos_id=*/0, sink);
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
