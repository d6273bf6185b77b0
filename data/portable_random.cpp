#include "data/portable_random.h"

#include <numeric>
#include <utility>

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

std::vector<std::uint64_t> portable_permutation(std::uint64_t n, std::uint64_t seed) {
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  SplitMix64 rng(seed);
  for (std::uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

}  // namespace ustrain
