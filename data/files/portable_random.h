// Portable pseudo-random numbers for the data floor: the same seed gives the same numbers with
// every compiler and standard library (std::shuffle and std::uniform_int_distribution do not
// promise that), so data order and the train/val split are reproducible everywhere.
//
// The generator is SplitMix64 (Steele, Lea and Flood, 2014): state += 0x9E3779B97F4A7C15, and
// the output is the state passed through the finaliser below. Bounded integers use rejection
// sampling (no modulo bias). Shuffles use IndexPermutation, which needs no memory.
#pragma once

#include <cstdint>

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

// A pseudo-random permutation of 0..n-1 evaluated one position at a time, in O(1) memory and
// time, so that a shuffled order over billions of windows needs no table and any position of
// it can be looked up directly (resuming, or one reader of many skipping to its share).
//
// It is a balanced Feistel network on 2h bits, 2^(2h) being the smallest power of four >= n:
// x splits into halves (L, R) of h bits; each of 4 rounds maps (L, R) -> (R, L ^ F_k(R)) with
// F_k(R) = finalize(R ^ key_k) masked to h bits and key_k = SplitMix64::derive(seed, k).
// Four rounds of a random-looking round function give a pseudo-random permutation (Luby and
// Rackoff). Results >= n are encrypted again until they fall below n ("cycle walking"),
// which keeps the map a bijection on 0..n-1; on average fewer than 4 passes are needed.
class IndexPermutation {
 public:
  IndexPermutation(std::uint64_t n, std::uint64_t seed);
  std::uint64_t size() const { return n_; }
  // The element at position i < n.
  std::uint64_t operator()(std::uint64_t i) const;

 private:
  std::uint64_t encrypt(std::uint64_t x) const;

  static constexpr int kRounds = 4;
  std::uint64_t n_;
  int half_bits_ = 0;
  std::uint64_t half_mask_ = 0;
  std::uint64_t keys_[kRounds] = {};
};

}  // namespace ustrain
