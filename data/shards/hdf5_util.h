// Small HDF5 helpers shared by the shard reader and writer (internal to data/; includes
// <hdf5.h>, so public headers must not include it). Every failure becomes a UserError naming
// the file; HDF5's own error printing is switched off. HDF5 (as built by Debian) is not
// thread-safe: only one thread of a process may be inside these functions at a time.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>

namespace ustrain::hdf5 {

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

void silence_error_printing();

// "shard PATH: WHAT (HDF5: innermost message)".
[[noreturn]] void fail(const std::string& path, const std::string& what);
// As fail(), adding that the file is damaged and what to do about it.
[[noreturn]] void fail_damaged(const std::string& path, const std::string& what);

// File access without locking for readers (a finished shard never changes, and locks fail on
// some cluster filesystems); with locking, where the filesystem allows it, for writers.
Handle make_file_access(bool lock);
Handle open_for_reading(const std::string& path);
Handle open_dataset(const std::string& path, hid_t file, const char* name);
// Length of a 1-D integer dataset; fail_damaged otherwise.
hsize_t integer_vector_length(const std::string& path, hid_t dataset, const char* name);

bool has_attribute(hid_t object, const char* name);
std::int64_t read_int_attribute(const std::string& path, hid_t object, const char* name);
// Fixed-length strings (what ustrain writes) and variable-length ones (what h5py writes).
std::string read_string_attribute(const std::string& path, hid_t object, const char* name);
void write_int_attribute(const std::string& path, hid_t object, const char* name, hid_t file_type,
                         std::int64_t value);
// Fixed-length, null-terminated UTF-8: what h5dump and h5py show as a plain string.
void write_string_attribute(const std::string& path, hid_t object, const char* name,
                            const std::string& value);

}  // namespace ustrain::hdf5
