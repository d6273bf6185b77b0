// Multi-rank GoogleTest binaries: main (mpi_test_main.cpp) makes the World, the tests use it.
// Every rank runs every test in the same order, so the collectives inside them match.
#pragma once

#include "parallel/world.h"

namespace ustrain::mpi_test {

World& world();

}  // namespace ustrain::mpi_test
