// Portable pseudo-random numbers for the data floor: the same seed gives the same numbers with
// every compiler and standard library (std::shuffle and std::uniform_int_distribution do not
// promise that), so data order and the train/val split are reproducible everywhere.
//
// The generator is SplitMix64 (Steele, Lea and Flood, 2014): state += 0x9E3779B97F4A7C15, and
// the output is the state passed through the finaliser below. Bounded integers use rejection
// sampling (no modulo bias); permutations are Fisher-Yates from the last position down.
#pragma once

#include <cstdint>
#include <vector>

namespace ustrain {

class SplitMix64 {
 public:
  static constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;

  // The SplitMix64 finaliser: a bijection in which every input bit affects every output bit.
  static constexpr std::uint64_t finalize(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // One seed per (seed, stream) pair, e.g. (loader seed, epoch):
  // finalize(seed ^ finalize(stream + kGamma)).
  static constexpr std::uint64_t derive(std::uint64_t seed, std::uint64_t stream) {
    return finalize(seed ^ finalize(stream + kGamma));
  }

  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() { return finalize(state_ += kGamma); }

  // Uniform in [0, bound), bound > 0: draws below (2^64 mod bound) are rejected, so every
  // residue is equally likely.
  std::uint64_t below(std::uint64_t bound);

  // Uniform in [0, 1) from the top 53 bits of one draw.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// A permutation of 0..n-1 by Fisher-Yates driven by SplitMix64(seed):
// for i = n-1 down to 1, swap element i with element below(i + 1).
std::vector<std::uint64_t> portable_permutation(std::uint64_t n, std::uint64_t seed);

}  // namespace ustrain
