#include "data/inputs/compressed_input.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kFileChunk = 1 << 20;
constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};
constexpr unsigned char kZstdMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
// zstd streams may also begin with a skippable frame (pzstd's output does): its little-endian
// magic is one of 0x184D2A50 to 0x184D2A5F.
constexpr unsigned char kZstdSkippableMagicTail[3] = {0x2a, 0x4d, 0x18};
// zstd --long=31 (the most zstd writes): a window of 2 GiB, beyond the decoder's default 2^27.
constexpr int kZstdWindowLogMax = 31;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool has_magic(const unsigned char* head, std::size_t size, const unsigned char* magic, std::size_t magic_size) {
  return size >= magic_size && std::memcmp(head, magic, magic_size) == 0;
}

bool has_zstd_magic(const unsigned char* head, std::size_t size) {
  return has_magic(head, size, kZstdMagic, sizeof kZstdMagic) ||
         (size >= 4 && (head[0] & 0xf0) == 0x50 && has_magic(head + 1, size - 1, kZstdSkippableMagicTail, 3));
}

// The verdict from the first bytes, checked against what the name promises.
Compression decide(const std::string& path, const unsigned char* head, std::size_t size) {
  const Compression by_bytes = has_magic(head, size, kGzipMagic, sizeof kGzipMagic) ? Compression::gzip
                               : has_zstd_magic(head, size)                          ? Compression::zstd
                                                                                     : Compression::none;
  const std::string name = lower(path);
  const Compression by_name = name.ends_with(".gz")    ? Compression::gzip
                              : name.ends_with(".zst") ? Compression::zstd
                                                       : Compression::none;
  if (by_name == Compression::none || by_bytes == by_name) return by_bytes;
  const std::string held = by_bytes == Compression::none ? "it is not compressed, or is damaged"
                                                         : fmt::format("it holds {} data", compression_name(by_bytes));
  throw UserError(fmt::format("input file {} is named as {} data but does not start with the {} magic bytes ({}): "
                              "rename it to what it holds, or recompress it",
                              path, compression_name(by_name), compression_name(by_name), held));
}

[[noreturn]] void fail_corrupt(const std::string& path, Compression compression, const std::string& why) {
  throw UserError(fmt::format("input file {} holds corrupt {} data ({}): the file is damaged; check it with {} -t "
                              "and replace it",
                              path, compression_name(compression), why, compression_name(compression)));
}

[[noreturn]] void fail_truncated(const std::string& path, Compression compression) {
  throw UserError(fmt::format("input file {} ends in the middle of its {} stream: the file is truncated (an "
                              "interrupted download or copy?); check it with {} -t and replace it",
                              path, compression_name(compression), compression_name(compression)));
}

}  // namespace

const char* compression_name(Compression compression) {
  switch (compression) {
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
    case Compression::none: break;
  }
  return "none";
}

std::string without_compression_suffix(const std::string& path) {
  const std::string name = lower(path);
  if (name.ends_with(".gz")) return path.substr(0, path.size() - 3);
  if (name.ends_with(".zst")) return path.substr(0, path.size() - 4);
  return path;
}

Compression compression_of(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw UserError(fmt::format("cannot read input file {}: {}", path, std::strerror(errno)));
  unsigned char head[sizeof kZstdMagic] = {};
  const std::size_t got = std::fread(head, 1, sizeof head, file.get());
  if (std::ferror(file.get()))
    throw UserError(fmt::format("error while reading input file {}: {}", path, std::strerror(errno)));
  return decide(path, head, got);
}

struct InputReader::State {
  std::string path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{nullptr, &std::fclose};
  std::vector<unsigned char> in = std::vector<unsigned char>(kFileChunk);
  std::size_t in_pos = 0, in_size = 0;  // unread input: in[in_pos, in_size)
  bool at_end = false;                  // the file has no more bytes
  std::int64_t file_bytes = 0;
  Compression compression = Compression::none;
  z_stream gzip{};
  bool in_gzip_member = false;  // a gzip member has begun and not yet ended
  ZSTD_DCtx* zstd = nullptr;
  std::size_t zstd_hint = 1;  // ZSTD_decompressStream's last result: 0 when a frame is complete

  void fill() {
    in_pos = 0;
    in_size = std::fread(in.data(), 1, in.size(), file.get());
    if (std::ferror(file.get()))
      throw UserError(fmt::format("error while reading input file {}: {}", path, std::strerror(errno)));
    at_end = in_size < in.size();
    file_bytes += static_cast<std::int64_t>(in_size);
  }

  std::size_t take_plain(char* out, std::size_t size) {
    if (in_pos == in_size && !at_end) fill();
    const std::size_t n = std::min(size, in_size - in_pos);
    std::memcpy(out, in.data() + in_pos, n);
    in_pos += n;
    return n;
  }

  // Zero bytes up to the end of the file, as gzip -t accepts them; anything else after them
  // is damage. No member header starts with a zero byte, so the padding cannot be mistaken.
  void skip_zero_padding() {
    for (;;) {
      if (std::any_of(in.data() + in_pos, in.data() + in_size, [](unsigned char b) { return b != 0; }))
        fail_corrupt(path, compression, "bytes other than zero padding after the last gzip member");
      in_pos = in_size;
      if (at_end) return;
      fill();
    }
  }

  // gzip files may hold several members one after another (`cat a.gz b.gz`): all are read.
  std::size_t inflate_some(char* out, std::size_t size) {
    gzip.next_out = reinterpret_cast<Bytef*>(out);
    gzip.avail_out = static_cast<uInt>(size);
    while (gzip.avail_out == size) {
      if (in_pos == in_size && !at_end) fill();
      const bool no_input = in_pos == in_size;
      if (no_input && !in_gzip_member) return 0;
      if (!in_gzip_member && in[in_pos] == 0) {  // tape and tar tools pad files with zeros
        skip_zero_padding();
        return 0;
      }
      if (!in_gzip_member) {
        if (inflateReset(&gzip) != Z_OK) fail_corrupt(path, compression, "cannot start a gzip member");
        in_gzip_member = true;
      }
      gzip.next_in = in.data() + in_pos;
      gzip.avail_in = static_cast<uInt>(in_size - in_pos);
      const int result = inflate(&gzip, Z_NO_FLUSH);
      in_pos = in_size - gzip.avail_in;
      if (result == Z_STREAM_END) in_gzip_member = false;
      else if (result != Z_OK && result != Z_BUF_ERROR)
        fail_corrupt(path, compression, gzip.msg ? gzip.msg : fmt::format("zlib error {}", result));
      else if (no_input && gzip.avail_out == size) fail_truncated(path, compression);
    }
    return size - gzip.avail_out;
  }

  // zstd files may hold several frames (pzstd writes them), skippable frames among them; the
  // last one must be complete.
  std::size_t unzstd_some(char* out, std::size_t size) {
    ZSTD_outBuffer output{out, size, 0};
    while (output.pos == 0) {
      if (in_pos == in_size && !at_end) fill();
      const bool no_input = in_pos == in_size;
      if (no_input && zstd_hint == 0) return 0;
      ZSTD_inBuffer input{in.data(), in_size, in_pos};
      const std::size_t result = ZSTD_decompressStream(zstd, &output, &input);
      in_pos = input.pos;
      if (ZSTD_isError(result)) fail_corrupt(path, compression, ZSTD_getErrorName(result));
      zstd_hint = result;
      if (no_input && output.pos == 0) {
        if (result != 0) fail_truncated(path, compression);
        return 0;
      }
    }
    return output.pos;
  }
};

InputReader::InputReader(const std::string& path) : state_(std::make_unique<State>()) {
  state_->path = path;
  state_->file.reset(std::fopen(path.c_str(), "rb"));
  if (!state_->file)
    throw UserError(fmt::format("cannot read input file {}: {} (was it moved or changed during the conversion?)", path,
                                std::strerror(errno)));
  start();
}

InputReader::InputReader(std::string_view content, const std::string& name) : state_(std::make_unique<State>()) {
  state_->path = name;
  state_->in.resize(std::min(kFileChunk, content.size() + 1));  // small inputs (fuzzing) need no 1 MiB buffer
  // Read only: fmemopen takes a writable buffer in its signature alone.
  state_->file.reset(fmemopen(const_cast<char*>(content.data()), content.size(), "rb"));
  if (!state_->file) throw std::runtime_error(fmt::format("fmemopen failed: {}", std::strerror(errno)));
  start();
}

void InputReader::start() {
  State& s = *state_;
  s.fill();
  s.compression = decide(s.path, s.in.data(), s.in_size);
  if (s.compression == Compression::gzip && inflateInit2(&s.gzip, 15 + 16) != Z_OK)  // 15 + 16: gzip framing
    throw std::runtime_error("zlib: inflateInit2 failed (out of memory?)");
  if (s.compression == Compression::zstd && !(s.zstd = ZSTD_createDCtx()))
    throw std::runtime_error("zstd: ZSTD_createDCtx failed (out of memory?)");
  if (s.zstd && ZSTD_isError(ZSTD_DCtx_setParameter(s.zstd, ZSTD_d_windowLogMax, kZstdWindowLogMax)))
    throw std::runtime_error("zstd: cannot allow windows of 2^31 bytes");
}

InputReader::~InputReader() {
  if (state_->compression == Compression::gzip) inflateEnd(&state_->gzip);
  ZSTD_freeDCtx(state_->zstd);  // accepts nullptr
}

std::size_t InputReader::read(char* buffer, std::size_t size) {
  if (size == 0) return 0;
  switch (state_->compression) {
    case Compression::gzip: return state_->inflate_some(buffer, size);
    case Compression::zstd: return state_->unzstd_some(buffer, size);
    case Compression::none: break;
  }
  return state_->take_plain(buffer, size);
}

std::int64_t InputReader::file_bytes_read() const { return state_->file_bytes; }

Compression InputReader::compression() const { return state_->compression; }

std::string read_content_head(const std::string& path, std::size_t bytes) {
  InputReader reader(path);
  std::string head(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    const std::size_t n = reader.read(head.data() + got, bytes - got);
    if (n == 0) break;
    got += n;
  }
  head.resize(got);
  return head;
}

}  // namespace ustrain
