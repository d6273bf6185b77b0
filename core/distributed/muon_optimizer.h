// Muon for the hidden layers' matrices (core/distributed/muon_matrices.h), AdamW for the rest.
// For each matrix W (rows, cols) with gradient G (already scaled by the step's grad_scale):
//   M <- mu M + G;  U = G + mu M (Nesterov) or M;  X = NewtonSchulz(U) (newton_schulz.h);
//   W <- W - lr (0.2 sqrt(max(rows, cols)) X + weight_decay W).
// The momentum M lives in the store's first-moment storage (adam_m, whose second moment stays
// zero for these matrices): it is sharded, checkpointed under the matrices' global names and
// resharded on load exactly as AdamW's first moment is.
//
// With unsharded optimizer state every rank iterates on every matrix it holds (like AdamW at
// ZeRO 0, every data-parallel rank updates the whole model). Under ZeRO 1-3 each matrix's U
// lies in chunks on several ranks of the store's sync group: each rank sends its chunks to the
// matrix's owner (point-to-point over the group, counted in its traffic), the owners iterate
// in parallel on their whole matrices, then send X back to the ranks holding the chunks.
#pragma once

#include <map>
#include <vector>

#include "core/distributed/adamw_optimizer.h"
#include "core/distributed/muon_matrices.h"
#include "core/distributed/newton_schulz.h"
#include "core/model/params.h"

namespace ustrain {

// Adds what Muon needs beside the stores to the plan, per store holding Muon matrices:
// [experts.]muon.gathered (the matrices this rank orthogonalizes, whole), muon.pieces (its
// chunks of every matrix's update; sharded state only), muon.workspace (Newton-Schulz).
void plan_muon(const ModelParams& params, MemoryPlan& plan);

class Muon : public Optimizer {
 public:
  // `memory` holds what plan_muon planned for `params`.
  Muon(const OptimSection& o, Backend& backend, const ModelParams& params, const PlannedMemory& memory);
  const char* name() const override { return "muon"; }
  void update(const ParamStore& store, Communicator& group, const OptimizerStep& s) override;

 private:
  struct StoreMemory {
    Tensor gathered, pieces;
    NewtonSchulzScratch scratch;
  };
  using Pieces = std::map<int, OptimizerPiece>;  // by registry handle

  void update_local(const std::vector<MuonMatrix>& matrices, const Pieces& mine, const StoreMemory& mem,
                    const OptimizerStep& s);
  void update_gathered(const ParamStore& store, Communicator& group, const std::vector<MuonMatrix>& matrices,
                       const Pieces& mine, const StoreMemory& mem, const OptimizerStep& s);
  // u (piece size) <- the update U of the piece, advancing its momentum; `tmp` as large.
  void momentum(const OptimizerPiece& p, Tensor u, Tensor tmp, const OptimizerStep& s);
  // The piece's values step along x, its part of X (overwritten).
  void apply(const OptimizerPiece& p, Tensor x, const MuonMatrix& m, const OptimizerStep& s);

  OptimSection optim_;
  Backend& backend_;
  AdamW adamw_;
  std::map<const ParamStore*, StoreMemory> memory_;
};

}  // namespace ustrain
