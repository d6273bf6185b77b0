// Input files that may be gzip- or zstd-compressed, read as a stream of their content: text
// and JSONL conversions read `corpus.jsonl.gz` or `books.txt.zst` without unpacking them first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ustrain {

enum class Compression { none, gzip, zstd };

const char* compression_name(Compression compression);  // "none", "gzip", "zstd"

// Told by the first bytes: gzip (1f 8b) and zstd (28 b5 2f fd, or a skippable frame's
// 5? 2a 4d 18 as pzstd writes first) data are read decompressed
// whatever the file is called. A name ending in .gz or .zst whose bytes lack that magic is a
// UserError naming the file. UserError if the file cannot be read.
Compression compression_of(const std::string& path);

// `path` without a trailing .gz or .zst (any case): the name that tells the format inside.
std::string without_compression_suffix(const std::string& path);

// A file's content, decompressed when compressed, in chunks: never the whole file in memory.
// gzip: every member of a multi-member file, then zero bytes to the end (padding) ignored.
// zstd: every frame, skippable frames skipped, windows up to 2^31 bytes (zstd --long=31).
class InputReader {
 public:
  explicit InputReader(const std::string& path);  // UserError naming the file if it cannot be read
  // `content` as if it were a file named `name` (which may promise compression, as a path
  // does); `content` must outlive the reader.
  InputReader(std::string_view content, const std::string& name);
  ~InputReader();
  InputReader(const InputReader&) = delete;
  InputReader& operator=(const InputReader&) = delete;

  // Up to `size` bytes of content; 0 at the end. UserError naming the file for a read error,
  // corrupt compressed data, or a compressed stream cut short (a truncated file).
  std::size_t read(char* buffer, std::size_t size);
  // Bytes of the file itself consumed so far (the compressed bytes for a compressed file).
  std::int64_t file_bytes_read() const;
  Compression compression() const;

 private:
  struct State;
  void start();  // reads the first chunk and sets up the decompression it tells
  std::unique_ptr<State> state_;
};

// The first `bytes` bytes of the file's content (fewer for a shorter one), decompressed.
std::string read_content_head(const std::string& path, std::size_t bytes);

}  // namespace ustrain
