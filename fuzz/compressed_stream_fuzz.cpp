// A text input's bytes, plain or (told by its first bytes) gzip- or zstd-compressed, read from
// memory as `data convert` reads a file: the decompression, then the cutting into documents
// with a small maximum document size (1 MiB). Up to 4 MiB of content is read, so that a small
// decompression bomb costs a bounded time.
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/inputs/compressed_input.h"
#include "data/inputs/document_splitter.h"
#include "kernels/error.h"

namespace {

constexpr std::size_t kMaxContent = std::size_t{4} << 20;
constexpr std::int64_t kMaxDocument = std::int64_t{1} << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    ustrain::InputReader reader(bytes, "input");
    ustrain::DocumentSplitter splitter("blank-line", kMaxDocument);
    splitter.begin_file("input");
    std::size_t documents = 0;
    const ustrain::DocumentSplitter::Sink count = [&](std::string_view, std::int64_t, std::int64_t) { ++documents; };
    std::vector<char> buffer(1 << 16);
    std::size_t content = 0;
    while (const std::size_t got = reader.read(buffer.data(), buffer.size())) {
      splitter.feed(std::string_view(buffer.data(), got), count);
      if ((content += got) > kMaxContent) return 0;
    }
    splitter.end_file(count);
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
