// Which parameters Muon updates, and which rank of a store's sync group orthogonalizes each.
//
// Muon takes the hidden layers' 2-D matrices, each as Hugging Face stores it: the q, k, v and
// o projections, gate, up and down, every routed and shared expert's matrices. Everything
// else (embeddings, output head, norms, the router) stays with AdamW.
//
// Under ZeRO (stages 1-3) a matrix's update lies in chunks on several ranks of the group; one
// owner gathers it whole, iterates, and returns the result. Owners are spread so that every
// rank does a similar share of Newton-Schulz work (the largest matrices first, each to the
// least loaded rank): the same on every rank, from the store's layout alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/model/param_store.h"

namespace ustrain {

bool muon_updates(const ParamSpec& spec);

struct MuonMatrix {
  int param = 0;  // registry handle
  std::int64_t rows = 0, cols = 0;
  int owner = 0;  // the group member that orthogonalizes it
  std::int64_t numel() const { return rows * cols; }
  std::int64_t small_side() const { return std::min(rows, cols); }
};

// The store's Muon matrices in layout order. Unsharded optimizer state: this rank owns all.
std::vector<MuonMatrix> muon_matrices(const ParamStore& store);

// Floats of the memory one rank of a store's group needs for Muon (core/distributed/muon_optimizer.h).
struct MuonSizes {
  std::int64_t gathered = 0;  // the matrices it orthogonalizes, whole (unsharded: the largest)
  std::int64_t pieces = 0;    // its parts of every matrix's update (sharded state only)
  std::int64_t largest = 0;   // the largest matrix: Newton-Schulz's product X (b A + c A^2)
  std::int64_t square = 0;    // k x k for the largest k = min(rows, cols): A and A^2 each
};
MuonSizes muon_sizes(const ParamStore& store, const std::vector<MuonMatrix>& matrices);

}  // namespace ustrain
