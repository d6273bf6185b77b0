// The sharding step: where each parameter of the model lives under tensor parallelism. The
// model declares every parameter with its global shape and knows nothing of this; this step
// maps names to layouts (Megatron's placement), computed from the geometry alone:
//
//   q_proj, k_proj, v_proj, gate_proj, up_proj   column-parallel: output rows split over tp
//   o_proj, down_proj                            row-parallel: input columns split over tp
//   embed_tokens, lm_head                        vocab-parallel: rows split after padding
//   norm gains                                   replicated; under sequence parallelism each
//                                                rank sees 1/tp of the rows, so their
//                                                gradients are partial sums over tp
//
// Ranks that replicate a parameter all keep it; tp rank 0 owns it (saves it and counts it in
// the gradient norm). At tp = 1 every parameter stays whole. Under pipeline parallelism a tied
// embedding lives on the first stage and, as the output head, on the last: the first owns it.
#pragma once

#include "core/recipe/geometry.h"
#include "core/model/param_registry.h"

namespace ustrain {

inline constexpr const char* kEmbeddingName = "model.embed_tokens.weight";

// How parameter `name` is split over the tensor-parallel ranks. UserError for a name the
// step does not know (a new layer kind needs its placement here).
TpLayout tensor_parallel_layout(const std::string& name);

// Places every declared parameter of `params` for this rank of `geometry`. Call before plan().
void parallelize(ParamRegistry& params, const ModelGeometry& geometry);

}  // namespace ustrain
