#include "data/shards/shard_file.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/shards/hdf5_util.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

using hdf5::Handle;

constexpr const char* kTokens = "tokens";
constexpr const char* kDocOffsets = "doc_offsets";

// Datasets record no creation times, so a conversion is reproducible byte for byte.
Handle make_dataset_creation(hsize_t chunk_elements, int compression) {
  Handle create(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(create.get(), false);
  if (chunk_elements > 0) {
    H5Pset_chunk(create.get(), 1, &chunk_elements);
    if (compression > 0) {
      // Shuffle groups the high bytes of the ids together, which deflate then squeezes well.
      H5Pset_shuffle(create.get());
      H5Pset_deflate(create.get(), static_cast<unsigned>(compression));
    }
  }
  return create;
}

void write_vector(const std::string& path, hid_t file, const char* name, hid_t file_type,
                  hid_t memory_type, const void* data, hsize_t length, hsize_t chunk, int compression) {
  Handle space(H5Screate_simple(1, &length, nullptr), H5Sclose);
  const hsize_t chunk_elements = chunk == 0 ? 0 : std::clamp<hsize_t>(chunk, 1, std::max<hsize_t>(length, 1));
  Handle create = make_dataset_creation(chunk_elements, compression);
  Handle dataset(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT),
                 H5Dclose);
  if (!dataset.valid()) hdf5::fail(path, fmt::format("cannot create dataset /{}", name));
  if (length > 0 && H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    hdf5::fail(path, fmt::format("cannot write dataset /{} (disk full?)", name));
  if (dataset.close() < 0) hdf5::fail(path, fmt::format("cannot finish dataset /{} (disk full?)", name));
}

}  // namespace

bool shard_tokens_are_16_bit(std::int64_t vocab_size) { return vocab_size < 65536; }

std::int64_t shard_chunk_tokens(std::int64_t vocab_size) {
  return (1 << 20) / (shard_tokens_are_16_bit(vocab_size) ? 2 : 4);
}

void write_shard(const std::string& path, const ShardHeader& header,
                 const std::vector<std::int32_t>& tokens,
                 const std::vector<std::uint64_t>& doc_offsets, const ShardWriteOptions& options) {
  const TokenizerIdentity& t = header.tokenizer;
  USTRAIN_ASSERT(!doc_offsets.empty() && doc_offsets.back() == tokens.size(),
                 "doc_offsets must end with the token count");
  USTRAIN_ASSERT(std::all_of(tokens.begin(), tokens.end(),
                             [&](std::int32_t id) { return id >= 0 && id < t.vocab_size; }),
                 "token id outside the vocabulary");
  USTRAIN_ASSERT(options.compression >= 0 && options.compression <= 9, "compression level 0-9");
  hdf5::silence_error_printing();
  Handle fapl = hdf5::make_file_access(/*lock=*/true);
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_obj_track_times(fcpl.get(), false);
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get()), H5Fclose);
  if (!file.valid())
    hdf5::fail(path, "cannot create the file (does it exist already, or is the directory not writable?)");
  const hid_t f = file.get();

  // HDF5 narrows the int32 ids to the stored width while writing.
  const hid_t token_type = shard_tokens_are_16_bit(t.vocab_size) ? H5T_STD_U16LE : H5T_STD_U32LE;
  write_vector(path, f, kTokens, token_type, H5T_NATIVE_INT32, tokens.data(), tokens.size(),
               static_cast<hsize_t>(shard_chunk_tokens(t.vocab_size)),
               options.compression);
  write_vector(path, f, kDocOffsets, H5T_STD_U64LE, H5T_NATIVE_UINT64, doc_offsets.data(),
               doc_offsets.size(), 0, 0);

  hdf5::write_int_attribute(path, f, "format_version", H5T_STD_I32LE, header.format_version);
  hdf5::write_int_attribute(path, f, "format_minor", H5T_STD_I32LE, header.format_minor);
  hdf5::write_string_attribute(path, f, "tokenizer", t.name);
  hdf5::write_string_attribute(path, f, "tokenizer_kind", t.kind);
  if (!t.model_checksum.empty())
    hdf5::write_string_attribute(path, f, "tokenizer_model_checksum", t.model_checksum);
  hdf5::write_int_attribute(path, f, "vocab_size", H5T_STD_I64LE, t.vocab_size);
  hdf5::write_int_attribute(path, f, "eos_id", H5T_STD_I32LE, t.eos_id);
  hdf5::write_string_attribute(path, f, "source", header.source);
  hdf5::write_int_attribute(path, f, "token_count", H5T_STD_I64LE, static_cast<std::int64_t>(tokens.size()));
  if (file.close() < 0) hdf5::fail(path, "cannot finish writing the file (disk full?)");
}

ShardHeader read_shard_header(const std::string& path) {
  Handle file = hdf5::open_for_reading(path);
  const hid_t f = file.get();
  ShardHeader header;
  TokenizerIdentity& t = header.tokenizer;
  header.format_version = static_cast<int>(hdf5::read_int_attribute(path, f, "format_version"));
  // Attributes added in format 1.1 are optional, so 1.0 shards still read.
  header.format_minor =
      hdf5::has_attribute(f, "format_minor") ? static_cast<int>(hdf5::read_int_attribute(path, f, "format_minor")) : 0;
  t.name = hdf5::read_string_attribute(path, f, "tokenizer");
  t.kind = hdf5::has_attribute(f, "tokenizer_kind") ? hdf5::read_string_attribute(path, f, "tokenizer_kind")
                                                    : (t.name == "byte" ? "byte" : "external");
  if (hdf5::has_attribute(f, "tokenizer_model_checksum"))
    t.model_checksum = hdf5::read_string_attribute(path, f, "tokenizer_model_checksum");
  t.vocab_size = hdf5::read_int_attribute(path, f, "vocab_size");
  t.eos_id = static_cast<std::int32_t>(hdf5::read_int_attribute(path, f, "eos_id"));
  header.source = hdf5::read_string_attribute(path, f, "source");
  header.token_count = hdf5::read_int_attribute(path, f, "token_count");
  return header;
}

void read_shard_tokens(const std::string& path, std::int32_t* out, std::int64_t count) {
  Handle file = hdf5::open_for_reading(path);
  Handle dataset = hdf5::open_dataset(path, file.get(), kTokens);
  const hsize_t length = hdf5::integer_vector_length(path, dataset.get(), kTokens);
  if (length != static_cast<hsize_t>(count))
    hdf5::fail_damaged(path, fmt::format("/{} holds {} tokens, expected {}", kTokens, length, count));
  // Ids too large for int32 saturate in the conversion and then fail the vocabulary check.
  if (count > 0 && H5Dread(dataset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    hdf5::fail_damaged(path, fmt::format("cannot read /{}", kTokens));
}

std::vector<std::uint64_t> read_shard_doc_offsets(const std::string& path) {
  Handle file = hdf5::open_for_reading(path);
  Handle dataset = hdf5::open_dataset(path, file.get(), kDocOffsets);
  std::vector<std::uint64_t> offsets(hdf5::integer_vector_length(path, dataset.get(), kDocOffsets));
  if (!offsets.empty() &&
      H5Dread(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data()) < 0)
    hdf5::fail_damaged(path, fmt::format("cannot read /{}", kDocOffsets));
  return offsets;
}

}  // namespace ustrain
