#include "data/files/portable_random.h"

#include <bit>

#include "kernels/error.h"

namespace ustrain {

std::uint64_t SplitMix64::below(std::uint64_t bound) {
  USTRAIN_ASSERT(bound > 0, "SplitMix64::below needs a positive bound");
  const std::uint64_t reject_under = (0 - bound) % bound;  // == 2^64 mod bound
  for (;;) {
    const std::uint64_t draw = next();
    if (draw >= reject_under) return draw % bound;
  }
}

IndexPermutation::IndexPermutation(std::uint64_t n, std::uint64_t seed) : n_(n) {
  USTRAIN_ASSERT(n <= (std::uint64_t{1} << 62), "IndexPermutation supports up to 2^62 elements");
  const int bits = n > 1 ? std::bit_width(n - 1) : 0;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = (std::uint64_t{1} << half_bits_) - 1;
  for (int k = 0; k < kRounds; ++k) keys_[k] = SplitMix64::derive(seed, static_cast<std::uint64_t>(k));
}

std::uint64_t IndexPermutation::encrypt(std::uint64_t x) const {
  std::uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (const std::uint64_t key : keys_) {
    const std::uint64_t mixed = left ^ (SplitMix64::finalize(right ^ key) & half_mask_);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

std::uint64_t IndexPermutation::operator()(std::uint64_t i) const {
  USTRAIN_ASSERT(i < n_, "IndexPermutation position out of range");
  std::uint64_t x = encrypt(i);
  while (x >= n_) x = encrypt(x);
  return x;
}

}  // namespace ustrain
