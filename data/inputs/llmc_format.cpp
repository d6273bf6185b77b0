#include "data/inputs/llmc_format.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "data/inputs/token_ids.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kHeaderInts = 256;
constexpr std::size_t kChunkTokens = 1 << 20;

IdType read_header(std::FILE* file, const InputFile& input, std::int64_t& count) {
  std::int32_t header[kHeaderInts];
  if (std::fread(header, sizeof header, 1, file) != 1)
    throw UserError(fmt::format("{} is shorter than the 1024-byte llm.c header: not an llm.c token file", input.path));
  IdType type;
  if (header[0] == 20240520 && header[1] == 1) {
    type = IdType::u16;
  } else if (header[0] == 20240801 && header[1] == 7) {
    type = IdType::u32;
  } else {
    throw UserError(fmt::format("{} has magic {} and version {}; llm.c token files have magic 20240520 version 1 "
                                "(uint16) or 20240801 version 7 (uint32)",
                                input.path, header[0], header[1]));
  }
  count = header[2];
  const std::uint64_t expected = sizeof header + static_cast<std::uint64_t>(count) * id_type_bytes(type);
  if (count < 0 || input.bytes != expected)
    throw UserError(fmt::format("{} is {} bytes but its header announces {} tokens ({} bytes): the file is "
                                "truncated or damaged; re-copy it",
                                input.path, input.bytes, count, expected));
  return type;
}

}  // namespace

void read_llmc(const std::vector<InputFile>& files, std::int64_t vocab_size, std::int32_t eos_id, DocumentSink& sink) {
  DocumentPieces pieces(sink);
  std::vector<unsigned char> raw;
  std::vector<std::int32_t> ids;
  for (const InputFile& input : files) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(input.path.c_str(), "rb"), &std::fclose);
    if (!file) throw UserError(fmt::format("cannot read {}: {}", input.path, std::strerror(errno)));
    std::int64_t count = 0;
    const IdType type = read_header(file.get(), input, count);
    const std::size_t width = id_type_bytes(type);
    sink.advance(kHeaderInts * 4);
    for (std::int64_t done = 0; done < count;) {
      const auto take = static_cast<std::size_t>(std::min<std::int64_t>(count - done, kChunkTokens));
      raw.resize(take * width);
      ids.resize(take);  // grown to the chunk only by files that have one
      if (std::fread(raw.data(), 1, raw.size(), file.get()) != raw.size())
        throw UserError(fmt::format("error while reading {}: {}", input.path,
                                    std::ferror(file.get()) ? std::strerror(errno) : "the file ended early"));
      decode_ids(raw.data(), take, type, vocab_size, ids.data(), input.path, done);
      // Each EOS starts a new document.
      std::size_t begin = 0;
      for (std::size_t i = 0; i < take; ++i) {
        if (ids[i] != eos_id) continue;
        pieces.append(std::span<const std::int32_t>(ids.data() + begin, i - begin));
        pieces.end_document();
        begin = i;
      }
      pieces.append(std::span<const std::int32_t>(ids.data() + begin, take - begin));
      done += static_cast<std::int64_t>(take);
      sink.advance(static_cast<std::int64_t>(raw.size()));
    }
  }
  pieces.end_document();
}

}  // namespace ustrain
