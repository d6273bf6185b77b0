// Muon for the hidden layers' matrices (core/distributed/muon_matrices.h), AdamW for the rest.
// For each matrix W (rows, cols) with gradient G (already scaled by the step's grad_scale):
//   M <- mu M + G;  U = G + mu M (Nesterov) or M;  X = NewtonSchulz(U) (newton_schulz.h);
//   W <- W - lr (0.2 sqrt(max(rows, cols)) X + weight_decay W).
// The momentum M lives in the store's first-moment storage (adam_m, whose second moment stays
// zero for these matrices): it is sharded, checkpointed under the matrices' global names and
// resharded on load exactly as AdamW's first moment is.
//
// Every matrix is orthogonalized whole (core/distributed/muon_matrices.h). Under ZeRO 1-3 a
// box's U lies in chunks on several ranks of the store's sync group: each rank sends its
// chunks to the box's owner (point-to-point over the group, counted in its traffic); under tp
// the box owners send the boxes on to the matrix's owner (over the tp group); the owners
// iterate in parallel, and X goes back the same way. With unsharded optimizer state every
// data-parallel rank updates what it holds itself (like AdamW at ZeRO 0), one matrix at a
// time: under tp its owner iterates while the other tp ranks wait.
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
// chunks of every matrix's update; sharded state only), muon.boxes (the tp boxes it gathers;
// under tp only), muon.workspace (Newton-Schulz).
void plan_muon(const ModelParams& params, MemoryPlan& plan);

class Muon : public Optimizer {
 public:
  // `memory` holds what plan_muon planned for `params`; `tp`: the tensor-parallel group the
  // matrices are split over (null without tp).
  Muon(const OptimSection& o, Backend& backend, const ModelParams& params, const PlannedMemory& memory,
       Communicator* tp = nullptr);
  const char* name() const override { return "muon"; }
  void update(const ParamStore& store, Communicator& group, const OptimizerStep& s) override;

 private:
  struct StoreMemory {
    Tensor gathered, pieces, boxes;
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

  // Under tp: matrix m's box to its owner's `whole` (to_owner) or back; else nothing.
  void move(const MuonMatrix& m, const Tensor& box, const Tensor& whole, const StoreMemory& mem, bool to_owner);

  OptimSection optim_;
  Backend& backend_;
  Communicator* tp_;
  AdamW adamw_;
  std::map<const ParamStore*, StoreMemory> memory_;
};

}  // namespace ustrain
