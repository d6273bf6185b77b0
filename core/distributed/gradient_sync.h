// What the gradients need beyond the data-parallel reduction (core/distributed/zero_engine.h)
// once backward is done: the tensor-parallel sum of partial gradients, and the norm of the
// whole model's gradient, whatever layout holds it.
#pragma once

#include "core/model/params.h"
#include "parallel/process_groups.h"

namespace ustrain {

// Adds up, over the tensor-parallel group, the gradients of the parameters whose gradient each
// tp rank holds only a part of (norm gains under sequence parallelism), in the stored range
// this rank's optimizer reads. Every tp rank holds the same layout, so the ranges match.
void sum_partial_grads(const ModelParams& params, ProcessGroup& tp);

// With tied embeddings: adds up, over the embedding group (the first and last pipeline
// stages), the gradients of the embedding's two copies (the input embedding and the output
// head), so that both take the same optimizer step and stay equal. Nothing to do without the
// group (pp = 1, or a middle stage).
void sum_tied_grads(const ModelParams& params, ProcessGroup* embedding);

// The squared L2 norm of the whole model's gradient, the same on every rank: each rank adds
// the squares of the gradient pieces it owns in every store (ModelParams::owned: its chunk of
// each parameter, and replicated parameters on one rank only), then the sum runs over the
// world in float64.
double grad_sum_of_squares(const ModelParams& params, Backend& backend, ProcessGroup& world);

}  // namespace ustrain
