#include "tests/unit/data/convert/foreign_writers.h"

#include <gtest/gtest.h>

#include <fstream>

namespace ustrain::test {
namespace {

// Appends `value` as `bytes` bytes, little- or big-endian.
void put(std::string& out, std::uint64_t value, int bytes, bool big_endian = false) {
  for (int i = 0; i < bytes; ++i) {
    const int shift = 8 * (big_endian ? bytes - 1 - i : i);
    out.push_back(static_cast<char>((value >> shift) & 0xFF));
  }
}

void save(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

int megatron_element_bytes(int code) {
  switch (code) {
    case 1: case 2: return 1;
    case 3: case 8: return 2;
    case 4: case 7: return 4;
    default: return 8;
  }
}

}  // namespace

void write_megatron(const std::string& prefix, const std::vector<std::vector<Ids>>& documents, int dtype_code) {
  const int width = megatron_element_bytes(dtype_code);
  std::string bin, lengths, pointers, doc_index;
  std::uint64_t sequences = 0;
  put(doc_index, 0, 8);
  for (const std::vector<Ids>& document : documents) {
    for (const Ids& sequence : document) {
      put(lengths, sequence.size(), 4);
      put(pointers, bin.size(), 8);
      for (std::int64_t id : sequence) put(bin, static_cast<std::uint64_t>(id), width);
      ++sequences;
    }
    put(doc_index, sequences, 8);
  }
  std::string idx("MMIDIDX\0\0", 9);
  put(idx, 1, 8);                                 // version
  idx.push_back(static_cast<char>(dtype_code));   // dtype
  put(idx, sequences, 8);                         // sequence count
  put(idx, documents.size() + 1, 8);              // document count: documents + 1
  save(prefix + ".idx", idx + lengths + pointers + doc_index);
  save(prefix + ".bin", bin);
}

void write_llmc(const std::string& path, const Ids& tokens, bool uint32) {
  std::string bytes;
  put(bytes, uint32 ? 20240801 : 20240520, 4);
  put(bytes, uint32 ? 7 : 1, 4);
  put(bytes, tokens.size(), 4);
  bytes.resize(256 * 4, '\0');
  for (std::int64_t id : tokens) put(bytes, static_cast<std::uint64_t>(id), uint32 ? 4 : 2);
  save(path, bytes);
}

void write_npy(const std::string& path, const std::string& descr, const std::vector<std::uint64_t>& shape,
               const Ids& values, int major, bool fortran) {
  std::string shape_text = "(";
  for (std::uint64_t extent : shape) shape_text += std::to_string(extent) + ", ";
  if (shape.size() > 1) shape_text.resize(shape_text.size() - 2);
  else if (shape.size() == 1) shape_text.resize(shape_text.size() - 1);
  shape_text += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape_text + ", }";
  // Padded with spaces and a final newline so that the data starts at a multiple of 64.
  const std::size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes.push_back(static_cast<char>(major));
  bytes.push_back(0);
  put(bytes, header.size(), major == 1 ? 2 : 4);
  bytes += header;
  const int width = std::stoi(descr.substr(2));
  for (std::int64_t value : values) put(bytes, static_cast<std::uint64_t>(value), width, descr[0] == '>');
  save(path, bytes);
}

}  // namespace ustrain::test
