#include "core/distributed/gradient_sync.h"

#include <vector>

#include "core/distributed/parallelize.h"

namespace ustrain {

void sum_partial_grads(const ModelParams& params, ProcessGroup& tp) {
  if (tp.size() == 1) return;
  std::vector<Work> pending;
  for (const ParamPiece& piece : params.updated_grads())
    if (params.specs()[static_cast<std::size_t>(piece.param)].partial_grads)
      pending.push_back(tp.for_tensors(piece.data.device).all_reduce(piece.data));
  wait_all(pending);
}

void sum_tied_grads(const ModelParams& params, ProcessGroup* embedding) {
  if (embedding == nullptr) return;
  std::vector<Work> pending;
  for (const ParamPiece& piece : params.updated_grads())
    if (params.specs()[static_cast<std::size_t>(piece.param)].name == kEmbeddingName)
      pending.push_back(embedding->for_tensors(piece.data.device).all_reduce(piece.data));
  wait_all(pending);
}

double grad_sum_of_squares(const ModelParams& params, Backend& backend, ProcessGroup& world) {
  std::vector<Tensor> pieces;
  for (const ParamPiece& piece : params.owned(ParamState::grad)) pieces.push_back(piece.data);
  return world.sum(backend.sum_of_squares_multi(pieces));
}

}  // namespace ustrain
