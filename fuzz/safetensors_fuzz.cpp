// A safetensors file: the length prefix, the JSON header, then every tensor ustrain can
// convert read as float32, as `ckpt import` and `ckpt inspect` do.
#include <cstdint>
#include <vector>

#include "core/checkpoint/safetensors_dtype.h"
#include "core/checkpoint/safetensors_file.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ustrain::fuzz::write_scratch("model.safetensors", data, size);
  try {
    const ustrain::SafetensorsReader reader(path);
    std::vector<float> values;
    for (const ustrain::SafetensorsEntry& e : reader.header().entries) {
      if (!ustrain::converts_to_f32(e.dtype)) continue;
      values.resize(static_cast<std::size_t>(e.numel()));
      reader.read_f32(e, values.data());
    }
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
