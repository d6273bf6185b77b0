#include "data/shards/hdf5_util.h"

#include <fmt/format.h>

#include "kernels/error.h"

// H5Pset_file_locking exists from 1.10.7 in the 1.10 series and from 1.12.1 on.
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
#define USTRAIN_HDF5_HAS_FILE_LOCKING 1
#endif

namespace ustrain::hdf5 {
namespace {

// The most specific message on HDF5's error stack (which is then cleared), for context.
std::string detail() {
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

void write_attribute(const std::string& path, hid_t object, const char* name, hid_t file_type,
                     hid_t memory_type, const void* value) {
  Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(H5Acreate2(object, name, file_type, scalar.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attribute.valid() || H5Awrite(attribute.get(), memory_type, value) < 0)
    fail(path, fmt::format("cannot write attribute {}", name));
}

Handle open_attribute(const std::string& path, hid_t object, const char* name, H5T_class_t expected) {
  if (!has_attribute(object, name)) fail_damaged(path, fmt::format("attribute {} is missing", name));
  Handle attribute(H5Aopen(object, name, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tget_class(type.get()) != expected)
    fail_damaged(path, fmt::format("attribute {} has the wrong type", name));
  // Read into room for one value: an array (or an empty dataspace) would overrun it.
  Handle space(H5Aget_space(attribute.get()), H5Sclose);
  if (!space.valid() || H5Sget_simple_extent_npoints(space.get()) != 1)
    fail_damaged(path, fmt::format("attribute {} is not a single value", name));
  return attribute;
}

}  // namespace

void silence_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void fail(const std::string& path, const std::string& what) {
  throw UserError(fmt::format("shard {}: {}{}", path, what, detail()));
}

void fail_damaged(const std::string& path, const std::string& what) {
  fail(path, what + "; the file is damaged or not a ustrain shard: re-copy the dataset or "
                    "convert it again");
}

Handle make_file_access(bool lock) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#ifdef USTRAIN_HDF5_HAS_FILE_LOCKING
  H5Pset_file_locking(fapl.get(), lock, /*ignore_when_disabled=*/true);
#else
  (void)lock;
#endif
  return fapl;
}

Handle open_for_reading(const std::string& path) {
  silence_error_printing();
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

hsize_t integer_vector_length(const std::string& path, hid_t dataset, const char* name) {
  Handle type(H5Dget_type(dataset), H5Tclose);
  Handle space(H5Dget_space(dataset), H5Sclose);
  hsize_t length = 0;
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), &length, nullptr) < 0)
    fail_damaged(path, fmt::format("/{} is not a 1-D integer dataset", name));
  return length;
}

bool has_attribute(hid_t object, const char* name) { return H5Aexists(object, name) > 0; }

std::int64_t read_int_attribute(const std::string& path, hid_t object, const char* name) {
  Handle attribute = open_attribute(path, object, name, H5T_INTEGER);
  std::int64_t value = 0;
  if (H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) < 0)
    fail_damaged(path, fmt::format("cannot read attribute {}", name));
  return value;
}

std::string read_string_attribute(const std::string& path, hid_t object, const char* name) {
  Handle attribute = open_attribute(path, object, name, H5T_STRING);
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

void write_int_attribute(const std::string& path, hid_t object, const char* name, hid_t file_type,
                         std::int64_t value) {
  write_attribute(path, object, name, file_type, H5T_NATIVE_INT64, &value);
}

void write_string_attribute(const std::string& path, hid_t object, const char* name,
                            const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.size() + 1);
  H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  write_attribute(path, object, name, type.get(), type.get(), value.c_str());
}

}  // namespace ustrain::hdf5
