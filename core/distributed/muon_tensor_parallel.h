// Muon under tensor parallelism: a matrix's boxes (one per tp rank) gathered whole on its
// owner (MuonMatrix::tp_owner), and the result's boxes sent back. A column-parallel matrix's
// boxes are consecutive row blocks, so they land in place; a row-parallel matrix's are column
// blocks, gathered one after the other into a staging buffer and interleaved row by row.
#pragma once

#include "core/distributed/muon_matrices.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

// Floats [begin, begin + n) of `t`, flat (null data before the plan is bound).
Tensor float_range(const Tensor& t, std::int64_t begin, std::int64_t n);

// Moves matrix m's boxes between the tp ranks (`box`: this rank's, m.box_numel() floats) and
// its owner (`whole`: m.numel() floats, row-major, on the owner only): to the owner
// (`to_owner`) or back. `staging`: m.numel() floats of scratch on the owner.
void move_boxes(Communicator& tp, Backend& backend, const MuonMatrix& m, const Tensor& box, const Tensor& whole,
                const Tensor& staging, bool to_owner);

}  // namespace ustrain
