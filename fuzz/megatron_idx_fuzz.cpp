// A Megatron-LM indexed dataset: the input is the .idx file; the .bin beside it holds 4 KiB
// of small token ids, so that offsets into it are checked as well as the index itself.
#include <cstdint>
#include <vector>

#include "data/inputs/megatron_format.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string bin = [] {
    const std::vector<std::uint8_t> tokens(4096, 1);
    return ustrain::fuzz::write_scratch("data.bin", tokens.data(), tokens.size());
  }();
  (void)bin;
  const std::string idx = ustrain::fuzz::write_scratch("data.idx", data, size);
  ustrain::fuzz::NullSink sink;
  try {
    ustrain::read_megatron({ustrain::fuzz::scratch_dir() + "/data"}, /*vocab_size=*/50304, sink);
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
