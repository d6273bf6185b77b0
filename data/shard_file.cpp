#include "data/shard_file.h"

#include <hdf5.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "kernels/error.h"

// H5Pset_file_locking exists from 1.10.7 in the 1.10 series and from 1.12.1 on.
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
#define USTRAIN_HDF5_HAS_FILE_LOCKING 1
#endif

namespace ustrain {
namespace {

constexpr const char* kTokens = "tokens";
constexpr const char* kDocOffsets = "doc_offsets";
constexpr hsize_t kChunkBytes = 1 << 20;

// Owns one HDF5 identifier and releases it with the matching close function.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), closer_(other.closer_) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  ~Handle() { close(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Returns HDF5's status so that writers can see a failed final flush.
  herr_t close() { return valid() ? closer_(std::exchange(id_, -1)) : 0; }

 private:
  hid_t id_;
  Closer closer_;
};

// Failures surface only as our messages, so HDF5 must not print its error stack itself.
void silence_hdf5_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// The most specific message on HDF5's error stack (which is then cleared), for context.
std::string hdf5_detail() {
  std::string message;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned depth, const H5E_error2_t* error, void* out) -> herr_t {
        if (depth == 0 && error->desc) *static_cast<std::string*>(out) = error->desc;
        return 0;
      },
      &message);
  H5Eclear2(H5E_DEFAULT);
  return message.empty() ? "" : " (HDF5: " + message + ")";
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw UserError(fmt::format("shard {}: {}{}", path, what, hdf5_detail()));
}

[[noreturn]] void fail_damaged(const std::string& path, const std::string& what) {
  fail(path, what + "; the file is damaged or not a ustrain shard: re-copy the dataset or "
                    "convert it again");
}

Handle make_file_access(bool lock) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#ifdef USTRAIN_HDF5_HAS_FILE_LOCKING
  // Writers lock where the filesystem allows it. Readers need no lock (a finished shard never
  // changes), and locks fail on some cluster filesystems.
  H5Pset_file_locking(fapl.get(), lock, /*ignore_when_disabled=*/true);
#else
  (void)lock;
#endif
  return fapl;
}

Handle open_for_reading(const std::string& path) {
  silence_hdf5_error_printing();
  Handle fapl = make_file_access(/*lock=*/false);
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.valid()) fail_damaged(path, "cannot be opened as HDF5");
  return file;
}

Handle open_dataset(const std::string& path, hid_t file, const char* name) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) fail_damaged(path, fmt::format("no dataset /{}", name));
  Handle dataset(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) fail_damaged(path, fmt::format("cannot open dataset /{}", name));
  return dataset;
}

// Length of a 1-D integer dataset.
hsize_t integer_vector_length(const std::string& path, hid_t dataset, const char* name) {
  Handle type(H5Dget_type(dataset), H5Tclose);
  Handle space(H5Dget_space(dataset), H5Sclose);
  hsize_t length = 0;
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), &length, nullptr) < 0)
    fail_damaged(path, fmt::format("/{} is not a 1-D integer dataset", name));
  return length;
}

void write_vector(const std::string& path, hid_t file, const char* name, hid_t file_type,
                  hid_t memory_type, const void* data, hsize_t length, bool chunked) {
  Handle space(H5Screate_simple(1, &length, nullptr), H5Sclose);
  Handle create(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (chunked) {
    const hsize_t chunk =
        std::clamp<hsize_t>(kChunkBytes / H5Tget_size(file_type), 1, std::max<hsize_t>(length, 1));
    H5Pset_chunk(create.get(), 1, &chunk);
  }
  Handle dataset(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT),
                 H5Dclose);
  if (!dataset.valid()) fail(path, fmt::format("cannot create dataset /{}", name));
  if (length > 0 && H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail(path, fmt::format("cannot write dataset /{} (disk full?)", name));
  if (dataset.close() < 0) fail(path, fmt::format("cannot finish dataset /{} (disk full?)", name));
}

void write_attribute(const std::string& path, hid_t file, const char* name, hid_t file_type,
                     hid_t memory_type, const void* value) {
  Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(H5Acreate2(file, name, file_type, scalar.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attribute.valid() || H5Awrite(attribute.get(), memory_type, value) < 0)
    fail(path, fmt::format("cannot write attribute {}", name));
}

void write_int_attribute(const std::string& path, hid_t file, const char* name, hid_t file_type,
                         std::int64_t value) {
  write_attribute(path, file, name, file_type, H5T_NATIVE_INT64, &value);
}

// Fixed-length, null-terminated UTF-8: what h5dump and h5py show as a plain string.
void write_string_attribute(const std::string& path, hid_t file, const char* name,
                            const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.size() + 1);
  H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  write_attribute(path, file, name, type.get(), type.get(), value.c_str());
}

Handle open_attribute(const std::string& path, hid_t file, const char* name, H5T_class_t expected) {
  if (H5Aexists(file, name) <= 0) fail_damaged(path, fmt::format("attribute {} is missing", name));
  Handle attribute(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tget_class(type.get()) != expected)
    fail_damaged(path, fmt::format("attribute {} has the wrong type", name));
  return attribute;
}

std::int64_t read_int_attribute(const std::string& path, hid_t file, const char* name) {
  Handle attribute = open_attribute(path, file, name, H5T_INTEGER);
  std::int64_t value = 0;
  if (H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) < 0)
    fail_damaged(path, fmt::format("cannot read attribute {}", name));
  return value;
}

// Accepts fixed-length strings (what we write) and variable-length ones (what h5py writes).
std::string read_string_attribute(const std::string& path, hid_t file, const char* name) {
  Handle attribute = open_attribute(path, file, name, H5T_STRING);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory_type.get(), H5T_VARIABLE);
    char* text = nullptr;
    if (H5Aread(attribute.get(), memory_type.get(), &text) < 0 || text == nullptr)
      fail_damaged(path, fmt::format("cannot read attribute {}", name));
    std::string value(text);
    H5free_memory(text);
    return value;
  }
  std::string buffer(H5Tget_size(type.get()), '\0');
  if (H5Aread(attribute.get(), type.get(), buffer.data()) < 0)
    fail_damaged(path, fmt::format("cannot read attribute {}", name));
  return buffer.substr(0, buffer.find('\0'));
}

}  // namespace

bool shard_tokens_are_16_bit(std::int64_t vocab_size) { return vocab_size < 65536; }

void write_shard(const std::string& path, const ShardHeader& header,
                 const std::vector<std::int32_t>& tokens,
                 const std::vector<std::uint64_t>& doc_offsets) {
  USTRAIN_ASSERT(!doc_offsets.empty() && doc_offsets.back() == tokens.size(),
                 "doc_offsets must end with the token count");
  USTRAIN_ASSERT(std::all_of(tokens.begin(), tokens.end(),
                             [&](std::int32_t id) { return id >= 0 && id < header.vocab_size; }),
                 "token id outside the vocabulary");
  silence_hdf5_error_printing();
  Handle fapl = make_file_access(/*lock=*/true);
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!file.valid()) fail(path, "cannot create the file (does it exist already, or is the directory not writable?)");
  const hid_t f = file.get();

  // HDF5 narrows the int32 ids to the stored width while writing; chunking keeps later
  // partial reads cheap, and compression stays off because token ids barely compress.
  const hid_t token_type = shard_tokens_are_16_bit(header.vocab_size) ? H5T_STD_U16LE : H5T_STD_U32LE;
  write_vector(path, f, kTokens, token_type, H5T_NATIVE_INT32, tokens.data(), tokens.size(), true);
  write_vector(path, f, kDocOffsets, H5T_STD_U64LE, H5T_NATIVE_UINT64, doc_offsets.data(),
               doc_offsets.size(), false);

  write_int_attribute(path, f, "format_version", H5T_STD_I32LE, header.format_version);
  write_string_attribute(path, f, "tokenizer", header.tokenizer);
  write_int_attribute(path, f, "vocab_size", H5T_STD_I64LE, header.vocab_size);
  write_int_attribute(path, f, "eos_id", H5T_STD_I32LE, header.eos_id);
  write_string_attribute(path, f, "source", header.source);
  write_int_attribute(path, f, "token_count", H5T_STD_I64LE, static_cast<std::int64_t>(tokens.size()));
  if (file.close() < 0) fail(path, "cannot finish writing the file (disk full?)");
}

ShardHeader read_shard_header(const std::string& path) {
  Handle file = open_for_reading(path);
  const hid_t f = file.get();
  ShardHeader header;
  header.format_version = static_cast<int>(read_int_attribute(path, f, "format_version"));
  header.tokenizer = read_string_attribute(path, f, "tokenizer");
  header.vocab_size = read_int_attribute(path, f, "vocab_size");
  header.eos_id = static_cast<std::int32_t>(read_int_attribute(path, f, "eos_id"));
  header.source = read_string_attribute(path, f, "source");
  header.token_count = read_int_attribute(path, f, "token_count");
  return header;
}

void read_shard_tokens(const std::string& path, std::int32_t* out, std::int64_t count) {
  Handle file = open_for_reading(path);
  Handle dataset = open_dataset(path, file.get(), kTokens);
  const hsize_t length = integer_vector_length(path, dataset.get(), kTokens);
  if (length != static_cast<hsize_t>(count))
    fail_damaged(path, fmt::format("/{} holds {} tokens, expected {}", kTokens, length, count));
  // Ids too large for int32 saturate in the conversion and then fail the vocabulary check.
  if (count > 0 && H5Dread(dataset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    fail_damaged(path, fmt::format("cannot read /{}", kTokens));
}

std::vector<std::uint64_t> read_shard_doc_offsets(const std::string& path) {
  Handle file = open_for_reading(path);
  Handle dataset = open_dataset(path, file.get(), kDocOffsets);
  std::vector<std::uint64_t> offsets(integer_vector_length(path, dataset.get(), kDocOffsets));
  if (!offsets.empty() &&
      H5Dread(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data()) < 0)
    fail_damaged(path, fmt::format("cannot read /{}", kDocOffsets));
  return offsets;
}

}  // namespace ustrain
