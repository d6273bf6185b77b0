// A checkpoint's manifest.json. One that reads must read again, unchanged, once written.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/checkpoint/format.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ustrain::CheckpointManifest m;
  try {
    m = ustrain::manifest_from_json(text, "manifest.json");
  } catch (const ustrain::UserError&) {
    return 0;
  }
  const std::string written = ustrain::manifest_to_json(m);
  if (ustrain::manifest_to_json(ustrain::manifest_from_json(written, "manifest.json")) != written) std::abort();
  return 0;
}
