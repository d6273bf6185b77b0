#include "tests/unit/data/convert/compressed_writers.h"

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdint>

namespace ustrain::test {

std::string gzip_member(const std::string& text) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, static_cast<uLong>(text.size())) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::string zstd_frame(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const std::size_t size = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  EXPECT_FALSE(ZSTD_isError(size));
  out.resize(size);
  return out;
}

std::string zstd_skippable_frame(const std::string& payload, unsigned variant) {
  std::string out;
  const auto put_le32 = [&](std::uint32_t value) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  };
  put_le32(ZSTD_MAGIC_SKIPPABLE_START + variant);
  put_le32(static_cast<std::uint32_t>(payload.size()));
  return out + payload;
}

std::string zstd_stream_frame(const std::string& text, int window_log) {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  EXPECT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, window_log)));
  EXPECT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_enableLongDistanceMatching, 1)));
  std::string out(ZSTD_compressBound(text.size()) + 1024, '\0');
  ZSTD_inBuffer input{text.data(), text.size(), 0};
  ZSTD_outBuffer output{out.data(), out.size(), 0};
  // Fed before it is ended, the compressor does not know the size: the header keeps the whole
  // window and no content size (given everything with ZSTD_e_end, it would shrink the window).
  while (input.pos < input.size)
    if (ZSTD_isError(ZSTD_compressStream2(context, &output, &input, ZSTD_e_continue))) break;
  ZSTD_inBuffer none{nullptr, 0, 0};
  for (std::size_t left = 1; left != 0;) {
    left = ZSTD_compressStream2(context, &output, &none, ZSTD_e_end);
    EXPECT_FALSE(ZSTD_isError(left));
    if (ZSTD_isError(left)) break;
  }
  ZSTD_freeCCtx(context);
  out.resize(output.pos);
  return out;
}

}  // namespace ustrain::test
