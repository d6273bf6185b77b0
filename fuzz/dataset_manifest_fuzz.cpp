// A dataset's manifest.json, as `ustrain train` and `data inspect` read it.
#include <cstdint>

#include "data/shards/manifest.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ustrain::fuzz::write_scratch("manifest.json", data, size);
  try {
    ustrain::read_manifest(path);
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
