#include "data/inputs/megatron_format.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "data/inputs/input_files.h"
#include "data/files/regular_file.h"
#include "data/inputs/token_ids.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

struct MegatronIndex {
  IdType type = IdType::u16;
  std::vector<std::int32_t> lengths;
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> documents;
};

template <class T>
T load(const std::string& bytes, std::size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);  // the files are little-endian, as are our hosts
  return value;
}

IdType dtype_from_code(const std::string& path, int code) {
  switch (code) {
    case 1: return IdType::u8;
    case 2: return IdType::i8;
    case 3: return IdType::i16;
    case 4: return IdType::i32;
    case 5: return IdType::i64;
    case 8: return IdType::u16;
    case 6: case 7:
      throw UserError(fmt::format("{}: dtype code {} is a floating-point type, which cannot hold token ids", path, code));
    default:
      throw UserError(fmt::format("{}: unknown dtype code {} (known: 1-8); is this a Megatron .idx file?", path, code));
  }
}

MegatronIndex read_index(const std::string& path) {
  const std::string bytes = read_regular_file(path);
  const auto damaged = [&](const std::string& what) {
    return UserError(fmt::format("Megatron index {} {}: the file is damaged or not a Megatron .idx; re-copy it",
                                 path, what));
  };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw damaged("does not start with the magic MMIDIDX");
  const auto version = load<std::uint64_t>(bytes, 9);
  if (version != 1)
    throw UserError(fmt::format("Megatron index {} has version {}; ustrain reads version 1", path, version));
  MegatronIndex index;
  index.type = dtype_from_code(path, static_cast<unsigned char>(bytes[17]));
  const auto sequences = load<std::uint64_t>(bytes, 18);
  const auto documents = load<std::uint64_t>(bytes, 26);
  const std::uint64_t expected = kHeaderBytes + 12 * sequences + 8 * documents;
  if (sequences > bytes.size() || documents > bytes.size() || bytes.size() != expected)
    throw damaged(fmt::format("is {} bytes, but its counts ({} sequences, {} document entries) need {}",
                              bytes.size(), sequences, documents, expected));
  index.lengths.resize(sequences);
  index.offsets.resize(sequences);
  index.documents.resize(documents);
  // An empty vector's data() may be null, which memcpy must not get even for 0 bytes.
  const auto copy = [&](auto& into, std::size_t at) {
    if (!into.empty()) std::memcpy(into.data(), bytes.data() + at, into.size() * sizeof(into[0]));
  };
  copy(index.lengths, kHeaderBytes);
  copy(index.offsets, kHeaderBytes + 4 * sequences);
  copy(index.documents, kHeaderBytes + 12 * sequences);
  if (documents == 0 || index.documents.front() != 0 || index.documents.back() != static_cast<std::int64_t>(sequences))
    throw damaged("has document indices that do not run from 0 to the sequence count");
  for (std::size_t d = 1; d < documents; ++d)
    if (index.documents[d] < index.documents[d - 1]) throw damaged("has decreasing document indices");
  for (std::int32_t length : index.lengths)
    if (length < 0) throw damaged("has a negative sequence length");
  return index;
}

}  // namespace

std::vector<std::string> megatron_prefixes(const std::vector<std::string>& inputs, const NameFilter& filter) {
  std::vector<std::string> prefixes;
  for (const std::string& input : inputs) {
    if (fs::is_directory(input)) {
      for (const InputFile& file : list_input_files({input}, filter))
        if (file.path.ends_with(".idx")) prefixes.push_back(file.path.substr(0, file.path.size() - 4));
    } else if (input.ends_with(".idx") || input.ends_with(".bin")) {
      prefixes.push_back(input.substr(0, input.size() - 4));
    } else {
      prefixes.push_back(input);
    }
  }
  for (const std::string& prefix : prefixes)
    for (const char* extension : {".idx", ".bin"})
      if (!fs::is_regular_file(prefix + extension))
        throw UserError(fmt::format("Megatron dataset {} lacks {}{}: pass PREFIX, PREFIX.idx or PREFIX.bin of a "
                                    "dataset that has both files",
                                    prefix, prefix, extension));
  return prefixes;
}

std::int64_t megatron_bytes(const std::vector<std::string>& prefixes) {
  std::int64_t total = 0;
  for (const std::string& prefix : prefixes) total += static_cast<std::int64_t>(fs::file_size(prefix + ".bin"));
  return total;
}

void read_megatron(const std::vector<std::string>& prefixes, std::int64_t vocab_size, DocumentSink& sink) {
  std::vector<unsigned char> raw;
  std::vector<std::int32_t> ids;
  DocumentPieces pieces(sink);
  for (const std::string& prefix : prefixes) {
    const MegatronIndex index = read_index(prefix + ".idx");
    const std::string bin = prefix + ".bin";
    std::error_code error;
    const auto bin_bytes = static_cast<std::int64_t>(fs::file_size(bin, error));
    if (error) throw UserError(fmt::format("cannot read {}: {}", bin, error.message()));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(bin.c_str(), "rb"), &std::fclose);
    if (!file) throw UserError(fmt::format("cannot read {}: {}", bin, std::strerror(errno)));
    const auto width = static_cast<std::int64_t>(id_type_bytes(index.type));
    for (std::size_t d = 0; d + 1 < index.documents.size(); ++d) {
      for (auto s = index.documents[d]; s < index.documents[d + 1]; ++s) {
        const std::int64_t offset = index.offsets[s], bytes = std::int64_t{index.lengths[s]} * width;
        if (offset < 0 || offset > bin_bytes || bytes > bin_bytes - offset)
          throw UserError(fmt::format("{}: sequence {} of {} bytes lies at offset {}, beyond the {} bytes of {}: "
                                      "the files do not belong together or {} is truncated",
                                      prefix + ".idx", s, bytes, offset, bin_bytes, bin, bin));
        raw.resize(static_cast<std::size_t>(bytes));
        if (::fseeko(file.get(), offset, SEEK_SET) != 0 ||
            std::fread(raw.data(), 1, raw.size(), file.get()) != raw.size())
          throw UserError(fmt::format("error while reading {}: {}", bin,
                                      std::ferror(file.get()) ? std::strerror(errno) : "the file ended early"));
        ids.resize(static_cast<std::size_t>(index.lengths[s]));
        decode_ids(raw.data(), ids.size(), index.type, vocab_size, ids.data(), bin, offset / width);
        pieces.append(ids);
        sink.advance(bytes);
      }
      pieces.end_document();
    }
  }
}

}  // namespace ustrain
