// NumPy .npy token arrays: the magic "\x93NUMPY", a major.minor version (1.0 has a u16 header
// length, 2.0 and 3.0 a u32), then a Python dict literal with 'descr' (e.g. '<u2', '<i4',
// '<u4', '<i8', '|u1'), 'fortran_order' and 'shape', padded with spaces to the data.
// A 1-D array is a token stream: one document per file, or, given an EOS id, a document
// ending after each EOS. A 2-D array (documents, length) holds one document per row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/inputs/document_sink.h"
#include "data/inputs/input_files.h"
#include "data/inputs/token_ids.h"

namespace ustrain {

struct NpyHeader {
  IdType type = IdType::u16;
  std::vector<std::uint64_t> shape;
  std::uint64_t data_offset = 0;
};

// UserError naming the file for a bad magic or header, a non-integer, big-endian or
// Fortran-order (2-D) array, a shape of other than 1 or 2 dimensions, or a size mismatch.
NpyHeader read_npy_header(const InputFile& input);

// eos_id < 0: no splitting of 1-D arrays.
void read_npy(const std::vector<InputFile>& files, std::int64_t vocab_size, std::int32_t eos_id, DocumentSink& sink);

}  // namespace ustrain
