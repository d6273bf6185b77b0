#include "data/inputs/text_check.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/inputs/compressed_input.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kExamples = 3;

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the UTF-8 sequence that `lead` starts and the allowed range of its second byte
// (which excludes overlong forms, surrogates and code points above U+10FFFF); 0 if invalid.
std::size_t sequence_length(unsigned char lead, unsigned char& low, unsigned char& high) {
  low = 0x80;
  high = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
    return 4;
  }
  return 0;
}

}  // namespace

TextVerdict check_text(std::string_view block, bool whole) {
  if (block.find('\0') != std::string_view::npos) return TextVerdict::nul_byte;
  const auto* bytes = reinterpret_cast<const unsigned char*>(block.data());
  const std::size_t size = block.size();
  for (std::size_t at = 0; at < size;) {
    unsigned char low = 0, high = 0;
    const std::size_t length = sequence_length(bytes[at], low, high);
    if (length == 0) return TextVerdict::invalid_utf8;
    for (std::size_t k = 1; k < length; ++k) {
      if (at + k == size) return whole ? TextVerdict::invalid_utf8 : TextVerdict::text;  // cut by the block
      const unsigned char c = bytes[at + k];
      if (k == 1 ? (c < low || c > high) : !continuation(c)) return TextVerdict::invalid_utf8;
    }
    at += length;
  }
  return TextVerdict::text;
}

TextVerdict check_text_file(const std::string& path) {
  std::string block;
  try {
    block = read_content_head(path, kTextCheckBytes + 1);  // one byte more tells whether the file goes on
  } catch (const UserError&) {
    // Bytes that start like gzip or zstd but do not decompress, in a file not named so: binary
    // data that happens to begin with the magic.
    if (without_compression_suffix(path) == path && compression_of(path) != Compression::none)
      return TextVerdict::nul_byte;
    throw;
  }
  const bool whole = block.size() <= kTextCheckBytes;
  block.resize(std::min(block.size(), kTextCheckBytes));
  return check_text(block, whole);
}

void SkippedFiles::add(const std::string& path, TextVerdict why) {
  Reason& reason = why == TextVerdict::nul_byte ? nul_ : utf8_;
  ++reason.count;
  if (reason.examples.size() < kExamples) reason.examples.push_back(path);
}

std::string SkippedFiles::describe() const {
  if (count() == 0) return "";
  std::vector<std::string> parts;
  const auto part = [&](const Reason& reason, const char* what) {
    if (reason.count == 0) return;
    parts.push_back(fmt::format("{} {} ({}{})", reason.count, what, fmt::join(reason.examples, ", "),
                                reason.count > static_cast<std::int64_t>(reason.examples.size()) ? ", ..." : ""));
  };
  part(nul_, "with a NUL byte");
  part(utf8_, "not valid UTF-8");
  return fmt::format("skipped {} {} that {} not text, judged by the first {} KiB: {}; name a file as an --input "
                     "to read it anyway",
                     count(), count() == 1 ? "file" : "files", count() == 1 ? "is" : "are", kTextCheckBytes / 1024,
                     fmt::join(parts, ", "));
}

std::vector<InputFile> keep_text_files(const std::vector<InputFile>& files, SkippedFiles& skipped) {
  std::vector<InputFile> kept;
  for (const InputFile& file : files) {
    const TextVerdict verdict = file.in_directory ? check_text_file(file.path) : TextVerdict::text;
    if (verdict == TextVerdict::text) kept.push_back(file);
    else skipped.add(file.path, verdict);
  }
  return kept;
}

}  // namespace ustrain
