// Plain POSIX files for checkpoints and exports: big sequential writes that can be flushed
// to disk (fsync) before they are published, and positioned reads of any part of a file.
// Every failure is a UserError naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ustrain {

class OutputFile {
 public:
  // Creates or truncates `path`.
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, std::size_t bytes);
  // fsync, then close: after this the contents survive a crash of the machine.
  void sync_and_close();
  std::uint64_t bytes_written() const { return written_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
};

class InputFile {
 public:
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const { return size_; }
  // Exactly `bytes` bytes from `offset`; a file that ends earlier is reported as truncated.
  void read_at(std::uint64_t offset, void* dst, std::size_t bytes) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// Writes `text` to `path` and fsyncs it.
void write_text_file(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);

}  // namespace ustrain
