// Writers of other tools' token files for tests, written from the published layouts
// (Megatron-LM's indexed dataset, llm.c's shards, NumPy's .npy), independently of ustrain's
// readers, so that a reader that misreads a layout fails the tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain::test {

using Ids = std::vector<std::int64_t>;

// PREFIX.bin + PREFIX.idx. Each document is a list of sequences. dtype_code as in Megatron:
// 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f32, 8 u16.
void write_megatron(const std::string& prefix, const std::vector<std::vector<Ids>>& documents, int dtype_code);

// An llm.c shard: uint16 (magic 20240520, version 1) or uint32 (magic 20240801, version 7).
void write_llmc(const std::string& path, const Ids& tokens, bool uint32);

// A .npy file: descr such as "<u2", "|u1", ">i4"; version major 1 (u16 header length) or 2/3
// (u32). Values are written in the byte order the descr names, in C order unless `fortran`.
void write_npy(const std::string& path, const std::string& descr, const std::vector<std::uint64_t>& shape,
               const Ids& values, int major = 1, bool fortran = false);

}  // namespace ustrain::test
