// An HDF5 token shard's attributes (and the shape of its datasets), as opening a dataset
// reads them. The input is not the file's bytes (that would fuzz HDF5's own parser): it
// chooses, attribute by attribute, whether it is there, its type (integers of each width and
// sign, floats, fixed and variable strings), its dataspace (scalar, empty, or an array) and
// its value; then /tokens and /doc_offsets. The shard is written through HDF5 and read back
// as opening a dataset does.
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/shards/shard_file.h"
#include "data/shards/shard_layout.h"
#include "fuzz/fuzz_support.h"
#include "kernels/error.h"

namespace {

const char* const kAttributes[] = {"format_version",           "format_minor", "tokenizer", "tokenizer_kind",
                                   "tokenizer_model_checksum", "vocab_size",   "eos_id",    "source",
                                   "token_count"};

hid_t pick_integer_type(FuzzedDataProvider& in) {
  const hid_t types[] = {H5T_STD_I8LE,  H5T_STD_U8LE,  H5T_STD_I16LE, H5T_STD_U16LE, H5T_STD_I32LE,
                         H5T_STD_U32LE, H5T_STD_I64LE, H5T_STD_U64LE, H5T_STD_I64BE, H5T_IEEE_F64LE};
  return types[in.ConsumeIntegralInRange<std::size_t>(0, std::size(types) - 1)];
}

// A dataspace of `count` elements: scalar (count 1 and the flag), null, or 1-D.
hid_t make_space(FuzzedDataProvider& in, hsize_t& count) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      count = 1;
      return H5Screate(H5S_SCALAR);
    case 1:
      count = 0;
      return H5Screate(H5S_NULL);
    default: {
      count = in.ConsumeIntegralInRange<hsize_t>(0, 4);
      return H5Screate_simple(1, &count, nullptr);
    }
  }
}

void write_attribute(hid_t file, const char* name, FuzzedDataProvider& in) {
  hsize_t count = 0;
  const hid_t space = make_space(in, count);
  const int kind = in.ConsumeIntegralInRange<int>(0, 2);
  if (kind == 0) {  // a number
    const hid_t type = pick_integer_type(in);
    std::vector<std::int64_t> values(count == 0 ? 1 : count);
    for (std::int64_t& v : values) v = in.ConsumeIntegral<std::int64_t>();
    const hid_t attribute = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attribute >= 0) {
      H5Awrite(attribute, H5T_NATIVE_INT64, values.data());
      H5Aclose(attribute);
    }
  } else {  // a string, fixed or variable length
    const bool variable = kind == 2;
    std::vector<std::string> texts(count == 0 ? 1 : count);
    for (std::string& t : texts) t = in.ConsumeRandomLengthString(64);
    const hid_t type = H5Tcopy(H5T_C_S1);
    std::size_t fixed = in.ConsumeIntegralInRange<std::size_t>(1, 80);
    H5Tset_size(type, variable ? H5T_VARIABLE : fixed);
    const hid_t attribute = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attribute >= 0) {
      if (variable) {
        std::vector<const char*> pointers;
        for (const std::string& t : texts) pointers.push_back(t.c_str());
        H5Awrite(attribute, type, pointers.data());
      } else {
        std::string packed;
        for (const std::string& t : texts) packed += t.substr(0, fixed) + std::string(fixed - std::min(fixed, t.size()), '\0');
        H5Awrite(attribute, type, packed.data());
      }
      H5Aclose(attribute);
    }
    H5Tclose(type);
  }
  H5Sclose(space);
}

void write_dataset(hid_t file, const char* name, FuzzedDataProvider& in) {
  if (!in.ConsumeBool()) return;
  hsize_t dims[2] = {in.ConsumeIntegralInRange<hsize_t>(0, 64), in.ConsumeIntegralInRange<hsize_t>(1, 3)};
  const int rank = in.ConsumeIntegralInRange<int>(1, 2);
  const hid_t space = H5Screate_simple(rank, dims, nullptr);
  const hid_t create = H5Pcreate(H5P_DATASET_CREATE);
  if (in.ConsumeBool()) {
    hsize_t chunk[2] = {in.ConsumeIntegralInRange<hsize_t>(1, 16), 1};
    H5Pset_chunk(create, rank, chunk);
    if (in.ConsumeBool()) H5Pset_deflate(create, 1);
  }
  const hid_t dataset = H5Dcreate2(file, name, pick_integer_type(in), space, H5P_DEFAULT, create, H5P_DEFAULT);
  if (dataset >= 0) {
    std::vector<std::int64_t> values(dims[0] * (rank == 2 ? dims[1] : 1));
    for (std::int64_t& v : values) v = in.ConsumeIntegralInRange<std::int64_t>(-2, 70000);
    if (!values.empty()) H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(dataset);
  }
  H5Pclose(create);
  H5Sclose(space);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string path = ustrain::fuzz::scratch_dir() + "/shard.h5";
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return 0;
  for (const char* name : kAttributes)
    if (in.ConsumeIntegralInRange<int>(0, 7) != 0) write_attribute(file, name, in);
  write_dataset(file, "tokens", in);
  write_dataset(file, "doc_offsets", in);
  H5Fclose(file);
  // Each open of an HDF5 file costs about a megabyte of zeroed cache: only what opening a
  // dataset reads of every shard (its attributes, then where /tokens lie).
  try {
    ustrain::read_shard_header(path);
    ustrain::read_shard_layout(path);
  } catch (const ustrain::UserError&) {
  }
  return 0;
}
