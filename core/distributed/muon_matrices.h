// Which parameters Muon updates, and which ranks orthogonalize each.
//
// Muon takes the hidden layers' 2-D matrices, each as Hugging Face stores it: the q, k, v and
// o projections, gate, up and down, every routed and shared expert's matrices. Everything
// else (embeddings, output head, norms, the router) stays with AdamW.
//
// A matrix may be split twice: over the tensor-parallel ranks into boxes (rows for a
// column-parallel matrix, columns for a row-parallel one), and each box's update under ZeRO
// (stages 1-3) into chunks over the store's sync group. One member of the sync group (the
// box owner) gathers each box, and one tensor-parallel rank among the box owners (the matrix
// owner) gathers the boxes into the whole matrix, iterates, and the result goes back the same
// way. Owners are spread so that every rank does a similar share of Newton-Schulz work (the
// largest matrices first, each to the least loaded rank): the same on every rank, from the
// store's layout alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/model/param_store.h"

namespace ustrain {

bool muon_updates(const ParamSpec& spec);

struct MuonMatrix {
  int param = 0;  // registry handle
  std::int64_t rows = 0, cols = 0;          // the whole matrix
  std::int64_t box_rows = 0, box_cols = 0;  // this rank's box: the whole matrix without tp
  TpLayout layout = TpLayout::replicated;   // how tp splits it
  int owner = 0;     // the sync-group member that gathers its box (this rank's, unsharded)
  int tp_owner = 0;  // the tensor-parallel rank that gathers the whole matrix
  std::int64_t numel() const { return rows * cols; }
  std::int64_t box_numel() const { return box_rows * box_cols; }
  std::int64_t small_side() const { return std::min(rows, cols); }
};

// The tensor-parallel ranks Muon's matrices are split over, and this rank among them.
struct MuonTpSplit {
  int parts = 1, rank = 0;
};
MuonTpSplit muon_tp_split(const ParamStore& store);

// The store's Muon matrices in layout order, with their owners.
std::vector<MuonMatrix> muon_matrices(const ParamStore& store);

// Floats of the memory one rank needs for Muon (core/distributed/muon_optimizer.h).
struct MuonSizes {
  std::int64_t gathered = 0;  // the whole matrices it orthogonalizes (unsharded: the largest)
  std::int64_t pieces = 0;    // its chunks of every matrix's update (sharded state only)
  std::int64_t boxes = 0;     // the boxes it gathers under tp (unsharded: the largest)
  std::int64_t largest = 0;   // the largest whole matrix: Newton-Schulz's X (b A + c A^2)
  std::int64_t square = 0;    // k x k for the largest k = min(rows, cols): A and A^2 each
};
MuonSizes muon_sizes(const ParamStore& store, const std::vector<MuonMatrix>& matrices);

}  // namespace ustrain
