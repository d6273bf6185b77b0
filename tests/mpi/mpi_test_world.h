// Multi-rank GoogleTest binaries: main (mpi_test_main.cpp) makes the World, the tests use it.
// Every rank runs every test in the same order, so the collectives inside them match.
#pragma once

#include <cstdint>

#include "parallel/world.h"

namespace ustrain::mpi_test {

World& world();

// SplitMix64's finaliser: test values every rank computes alike from a seed.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace ustrain::mpi_test
