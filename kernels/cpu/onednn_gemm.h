// bf16 GEMMs on the CPU through oneDNN's matmul primitive, which uses the CPU's bf16 dot
// products (AVX512-BF16) where it has them and exact slower paths where not: bf16 operands,
// products exact, sums in fp32, an fp32 result, as a GPU's bf16 GEMM with fp32 accumulation.
// Primitives are built once per shape and kept, so steps after the first build none.
// oneDNN runs on OpenMP and takes as many threads as OpenMP offers the calling thread, so a
// backend told to use fewer cores passes its count here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ustrain::cpu {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // C += A B instead of C = A B
  auto operator<=>(const GemmShape&) const = default;
};

class Bf16Gemm {
 public:
  // threads: how many OpenMP threads oneDNN may use; 0 leaves OpenMP's setting.
  explicit Bf16Gemm(int threads = 0);
  ~Bf16Gemm();
  Bf16Gemm(const Bf16Gemm&) = delete;
  Bf16Gemm& operator=(const Bf16Gemm&) = delete;

  // C (m, n) = op(A) op(B) (+ C), row-major: op(A) is (m, k) (stored (k, m) when trans_a),
  // op(B) (k, n) (stored (n, k) when trans_b); a and b hold bf16 bits.
  void run(const GemmShape& s, const std::uint16_t* a, const std::uint16_t* b, float* c);

  // oneDNN's name for the implementation the last new shape got (e.g. "brg:avx512_core_bf16").
  std::string implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ustrain::cpu
