// What the collectives tests share: the communicator under test (MPI's, or with
// USTRAIN_TEST_STAGED=1 the host-staged one around it), inputs whose partial sums are exact in
// every dtype, host buffers of any dtype read as doubles, and the serial references.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "parallel/comm/bf16.h"
#include "parallel/comm/communicator.h"
#include "parallel/comm/staged_communicator.h"
#include "tests/mpi/mpi_test_world.h"

namespace ustrain::mpi_test {

// The communicator of every rank under test: MPI's, or the staged one around it.
inline std::unique_ptr<Communicator> everyone() {
  const char* staged = std::getenv("USTRAIN_TEST_STAGED");
  if (staged == nullptr || std::string(staged) != "1") return world().everyone();
  static CpuBackend cpu(1);  // outlives every communicator of the process
  return std::make_unique<StagedCommunicator>(world().everyone(), cpu, "everyone");
}

// The value member `rank` contributes at element i for test `seed`.
inline double input(DType t, std::uint64_t seed, int rank, std::int64_t i) {
  const std::uint64_t h = mix(seed * 1000003u + static_cast<std::uint64_t>(rank) * 7919u + static_cast<std::uint64_t>(i) * 0x100000001b3ull);
  switch (t) {
    case DType::f32: return static_cast<double>(static_cast<std::int64_t>(h % 2049) - 1024) / 8.0;
    case DType::bf16: return static_cast<double>(static_cast<std::int64_t>(h % 33) - 16) / 4.0;
    case DType::f16: return static_cast<double>(static_cast<std::int64_t>(h % 257) - 128) / 16.0;
    default: return static_cast<double>(static_cast<std::int64_t>(h % 2000001) - 1000000);
  }
}

// A host buffer of any tested dtype, read and written as doubles (exact for our values).
class Buffer {
 public:
  Buffer(DType t, std::int64_t n) : dtype_(t), bytes_(static_cast<std::size_t>(n) * dtype_size(t)), n_(n) {}
  Tensor tensor() { return Tensor(bytes_.data(), Shape{n_}, dtype_); }
  std::int64_t size() const { return n_; }
  void set(std::int64_t i, double v) {
    char* p = bytes_.data() + static_cast<std::size_t>(i) * dtype_size(dtype_);
    if (dtype_ == DType::f32) { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); }
    else if (dtype_ == DType::bf16) { const std::uint16_t b = bf16::from_float(static_cast<float>(v)); std::memcpy(p, &b, 2); }
    else if (dtype_ == DType::f16) { const auto h = static_cast<_Float16>(v); std::memcpy(p, &h, 2); }
    else { const std::int32_t k = static_cast<std::int32_t>(v); std::memcpy(p, &k, 4); }
  }
  double get(std::int64_t i) const {
    const char* p = bytes_.data() + static_cast<std::size_t>(i) * dtype_size(dtype_);
    if (dtype_ == DType::f32) { float f; std::memcpy(&f, p, 4); return f; }
    if (dtype_ == DType::bf16) { std::uint16_t b; std::memcpy(&b, p, 2); return bf16::to_float(b); }
    if (dtype_ == DType::f16) { _Float16 h; std::memcpy(&h, p, 2); return static_cast<double>(h); }
    std::int32_t k; std::memcpy(&k, p, 4); return k;
  }
  void fill_input(std::uint64_t seed, int rank, std::int64_t offset = 0) {
    for (std::int64_t i = 0; i < n_; ++i) set(i, input(dtype_, seed, rank, offset + i));
  }

 private:
  DType dtype_;
  std::vector<char> bytes_;
  std::int64_t n_;
};

inline double reference_sum(DType t, std::uint64_t seed, int members, std::int64_t i) {
  double s = 0;
  for (int r = 0; r < members; ++r) s += input(t, seed, r, i);
  return s;
}

// avg as specified: the exact sum, divided by the size in f32 (bf16, fp16: then rounded).
inline double reference_avg(DType t, double sum, int members) {
  const float q = static_cast<float>(sum) / static_cast<float>(members);
  if (t == DType::f16) return static_cast<double>(static_cast<_Float16>(q));
  return t == DType::bf16 ? bf16::to_float(bf16::from_float(q)) : q;
}

}  // namespace ustrain::mpi_test
