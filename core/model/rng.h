// Portable random numbers: the same seed gives the same numbers on every platform and
// compiler, which std:: distributions do not promise.
//
// Two kinds. The counter-based functions (uniform_at, normal_at, fill_normal) give element
// `index` of stream `stream` directly, so parameter initialisation does not depend on how a
// tensor is split across threads or ranks. Rng is a sequential generator whose whole state
// is one u64, so it can be saved in a checkpoint and resumed exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ustrain {

// The splitmix64 finaliser: a bijective mix in which every input bit affects every output bit.
std::uint64_t mix64(std::uint64_t x);

// FNV-1a 64 of the bytes, then mix64; e.g. to derive a stream from a parameter name.
std::uint64_t hash_string(std::string_view s);

// Uniform in [0, 1) with 53 random bits, for element `index` of `stream`.
double uniform_at(std::uint64_t stream, std::uint64_t index);

// Standard normal for element `index` of `stream` (Box-Muller from two uniforms in (0, 1)).
double normal_at(std::uint64_t stream, std::uint64_t index);

// dst[i] = stddev * normal_at(stream, offset + i), rounded to float.
void fill_normal(float* dst, std::size_t n, std::uint64_t stream, double stddev,
                 std::uint64_t offset = 0);

// Sequential splitmix64 generator.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next_u64();
  double uniform();  // in [0, 1)

  std::uint64_t state() const { return state_; }
  void set_state(std::uint64_t state) { state_ = state; }

 private:
  std::uint64_t state_;
};

}  // namespace ustrain
