// Whether a file is text, judged from its first block: a directory converted as text often
// holds binaries too (compiled code, images), whose bytes would only train the model on noise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/inputs/input_files.h"

namespace ustrain {

enum class TextVerdict { text, nul_byte, invalid_utf8 };

// How much of a file is looked at: enough to catch binary headers, cheap for many files.
constexpr std::size_t kTextCheckBytes = 64 * 1024;

// `block` is the start of a file, and the whole file when `whole`; otherwise a multi-byte
// character may be cut at its end, which is not held against it.
TextVerdict check_text(std::string_view block, bool whole);

// Reads the first kTextCheckBytes of `path`'s content, decompressed for a gzip or zstd file
// (data/inputs/compressed_input.h); UserError naming it if it cannot be read.
TextVerdict check_text_file(const std::string& path);

// Files left out because they are not text, counted per reason with a few names as examples.
class SkippedFiles {
 public:
  void add(const std::string& path, TextVerdict why);
  std::int64_t count() const { return nul_.count + utf8_.count; }
  // "skipped 3 files that are not text: 2 with a NUL byte (a.so, b.png), 1 not UTF-8 (c.dat);
  // ..." with advice; empty when none was skipped.
  std::string describe() const;

 private:
  struct Reason {
    std::int64_t count = 0;
    std::vector<std::string> examples;
  };
  Reason nul_, utf8_;
};

// The files as given, minus those found in directories that are not text (a file the user
// named is read whatever it holds). Each one left out is added to `skipped`.
std::vector<InputFile> keep_text_files(const std::vector<InputFile>& files, SkippedFiles& skipped);

}  // namespace ustrain
