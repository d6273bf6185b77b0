#include "data/inputs/npy_format.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kChunkTokens = 1 << 20;
using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// The header dict, e.g. {'descr': '<u2', 'fortran_order': False, 'shape': (10,), }: string
// keys, values that are strings, True/False, or tuples of integers (kept as text).
class DictParser {
 public:
  DictParser(std::string text, std::string path) : text_(std::move(text)), path_(std::move(path)) {}

  std::map<std::string, std::string> parse() {
    std::map<std::string, std::string> values;
    expect('{');
    while (skip_space(), peek() != '}') {
      const std::string key = quoted();
      expect(':');
      skip_space();
      values[key] = value();
      skip_space();
      if (peek() == ',') ++at_;
    }
    return values;
  }

 private:
  [[noreturn]] void fail() const {
    throw UserError(fmt::format("{}: the .npy header dict is malformed near byte {}: {}", path_, at_, text_));
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail();
    ++at_;
  }
  std::string quoted() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail();
    const std::size_t end = text_.find(quote, at_ + 1);
    if (end == std::string::npos) fail();
    std::string result = text_.substr(at_ + 1, end - at_ - 1);
    at_ = end + 1;
    return result;
  }
  std::string value() {
    if (peek() == '\'' || peek() == '"') return quoted();
    const char close = peek() == '(' ? ')' : '\0';
    const std::size_t end = close ? text_.find(close, at_) + 1 : text_.find_first_of(",}", at_);
    if (end == std::string::npos || end == 0) fail();
    std::string result = text_.substr(at_, end - at_);
    at_ = end;
    return result;
  }

  std::string text_, path_;
  std::size_t at_ = 0;
};

IdType parse_descr(const std::string& descr, const std::string& path) {
  static const std::map<std::string, IdType> kTypes = {
      {"u1", IdType::u8}, {"i1", IdType::i8}, {"u2", IdType::u16}, {"i2", IdType::i16},
      {"u4", IdType::u32}, {"i4", IdType::i32}, {"u8", IdType::u64}, {"i8", IdType::i64}};
  const auto found = descr.size() == 3 ? kTypes.find(descr.substr(1)) : kTypes.end();
  if (found == kTypes.end())
    throw UserError(fmt::format("{} holds '{}' elements; token arrays must be integers such as '<u2', '<i4', "
                                "'<u4', '<i8' or '|u1' (save them with arr.astype(np.uint32))",
                                path, descr));
  const char order = descr[0];
  if (order == '>' && id_type_bytes(found->second) > 1)
    throw UserError(fmt::format("{} is big-endian ('{}'); save it little-endian, e.g. "
                                "arr.astype('<{}')",
                                path, descr, descr.substr(1)));
  if (order != '<' && order != '|' && order != '=' && order != '>')
    throw UserError(fmt::format("{}: unknown byte order in descr '{}'", path, descr));
  return found->second;
}

std::vector<std::uint64_t> parse_shape(const std::string& text, const std::string& path) {
  std::vector<std::uint64_t> shape;
  std::size_t at = text.find('(');
  if (at == std::string::npos) throw UserError(fmt::format("{}: the .npy shape '{}' is not a tuple", path, text));
  for (++at; at < text.size();) {
    while (at < text.size() && (text[at] == ' ' || text[at] == ',')) ++at;
    if (at >= text.size() || text[at] == ')') break;
    // std::stoull would read "-5" as 2^64 - 5, and the shape as one far too large.
    if (std::isdigit(static_cast<unsigned char>(text[at])) == 0)
      throw UserError(fmt::format("{}: the .npy shape {} holds an extent that is not a whole number >= 0; the header "
                                  "is damaged: re-copy or re-save the file",
                                  path, text));
    std::size_t used = 0;
    shape.push_back(std::stoull(text.substr(at), &used));
    at += used;
  }
  return shape;
}

}  // namespace

NpyHeader read_npy_header(const InputFile& input) {
  File file(std::fopen(input.path.c_str(), "rb"), &std::fclose);
  if (!file) throw UserError(fmt::format("cannot read {}: {}", input.path, std::strerror(errno)));
  unsigned char start[12] = {};
  const std::size_t got = std::fread(start, 1, sizeof start, file.get());
  if (got < 10 || std::memcmp(start, "\x93NUMPY", 6) != 0)
    throw UserError(fmt::format("{} does not start with the .npy magic \\x93NUMPY: not a NumPy file", input.path));
  const int major = start[6];
  if (major < 1 || major > 3)
    throw UserError(fmt::format("{} is .npy version {}.{}; ustrain reads versions 1.0 to 3.0", input.path, major, start[7]));
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::uint64_t header_length = 0;
  for (std::size_t b = 0; b < length_bytes; ++b) header_length |= std::uint64_t{start[8 + b]} << (8 * b);
  NpyHeader header;
  header.data_offset = 8 + length_bytes + header_length;
  if (header.data_offset > input.bytes)
    throw UserError(fmt::format("{} is truncated inside its .npy header", input.path));
  std::string dict(header_length, '\0');
  if (std::fseek(file.get(), static_cast<long>(8 + length_bytes), SEEK_SET) != 0 ||
      std::fread(dict.data(), 1, dict.size(), file.get()) != dict.size())
    throw UserError(fmt::format("cannot read the .npy header of {}", input.path));

  std::map<std::string, std::string> values;
  try {
    values = DictParser(dict, input.path).parse();
    for (const char* key : {"descr", "fortran_order", "shape"})
      if (!values.count(key)) throw UserError(fmt::format("{}: the .npy header lacks '{}'", input.path, key));
    header.shape = parse_shape(values["shape"], input.path);
  } catch (const std::logic_error& error) {  // std::stoull
    throw UserError(fmt::format("{}: the .npy header is malformed ({}): {}", input.path, error.what(), dict));
  }
  header.type = parse_descr(values["descr"], input.path);
  if (header.shape.empty() || header.shape.size() > 2)
    throw UserError(fmt::format("{} has shape {}; ustrain reads 1-D token streams and 2-D (documents, length) "
                                "arrays",
                                input.path, values["shape"]));
  if (values["fortran_order"] != "False" && header.shape.size() == 2)
    throw UserError(fmt::format("{} is stored in Fortran (column) order, so its rows are not contiguous; save it "
                                "with np.ascontiguousarray",
                                input.path));
  // Checked: a shape such as (2**61 + 10,) would otherwise wrap around to a small size.
  std::uint64_t count = 1, expected = 0;
  bool overflow = false;
  for (std::uint64_t extent : header.shape) overflow |= __builtin_mul_overflow(count, extent, &count);
  overflow |= __builtin_mul_overflow(count, std::uint64_t{id_type_bytes(header.type)}, &expected);
  overflow |= __builtin_add_overflow(expected, header.data_offset, &expected);
  if (overflow || count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw UserError(fmt::format("{} has shape {}, more elements than any file holds: the header is damaged; re-copy "
                                "the file",
                                input.path, values["shape"]));
  if (input.bytes != expected)
    throw UserError(fmt::format("{} is {} bytes, but its header (shape {}, '{}') needs {}: the file is "
                                "truncated or damaged; re-copy it",
                                input.path, input.bytes, values["shape"], values["descr"], expected));
  return header;
}

void read_npy(const std::vector<InputFile>& files, std::int64_t vocab_size, std::int32_t eos_id, DocumentSink& sink) {
  DocumentPieces pieces(sink);
  std::vector<unsigned char> raw;
  std::vector<std::int32_t> ids;
  for (const InputFile& input : files) {
    const NpyHeader header = read_npy_header(input);
    File file(std::fopen(input.path.c_str(), "rb"), &std::fclose);
    if (!file || ::fseeko(file.get(), static_cast<off_t>(header.data_offset), SEEK_SET) != 0)
      throw UserError(fmt::format("cannot read {}: {}", input.path, std::strerror(errno)));
    sink.advance(static_cast<std::int64_t>(header.data_offset));
    const std::size_t width = id_type_bytes(header.type);
    const std::uint64_t rows = header.shape.size() == 2 ? header.shape[0] : 1;
    const std::uint64_t row_length = header.shape.back();
    std::int64_t position = 0;
    for (std::uint64_t row = 0; row < rows; ++row) {
      for (std::uint64_t done = 0; done < row_length;) {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(row_length - done, kChunkTokens));
        raw.resize(take * width);
        ids.resize(take);
        if (std::fread(raw.data(), 1, raw.size(), file.get()) != raw.size())
          throw UserError(fmt::format("error while reading {}: {}", input.path,
                                      std::ferror(file.get()) ? std::strerror(errno) : "the file ended early"));
        decode_ids(raw.data(), take, header.type, vocab_size, ids.data(), input.path, position);
        // In a 1-D stream, a document ends after each EOS.
        std::size_t begin = 0;
        if (header.shape.size() == 1 && eos_id >= 0) {
          for (std::size_t i = 0; i < take; ++i) {
            if (ids[i] != eos_id) continue;
            pieces.append(std::span<const std::int32_t>(ids.data() + begin, i + 1 - begin));
            pieces.end_document();
            begin = i + 1;
          }
        }
        pieces.append(std::span<const std::int32_t>(ids.data() + begin, take - begin));
        done += take;
        position += static_cast<std::int64_t>(take);
        sink.advance(static_cast<std::int64_t>(raw.size()));
      }
      pieces.end_document();
    }
  }
}

}  // namespace ustrain
