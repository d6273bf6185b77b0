// Auxiliary-loss-free balancing (DeepSeek-V3; torchtitan's default): each MoE layer's router
// adds a per-expert bias to its scores to choose experts (core/model/moe_mlp.h), and after
// every optimizer step the bias moves towards balance by the expert load of the WHOLE global
// batch, so that it is the same on every layout:
//
//   bias_i += rate * sign(mean_j load_j - load_i)
//
// load_i being the token choices of expert i in that layer over the step's micro-batches on
// every data- and context-parallel rank (tensor-parallel ranks route the same tokens: counted
// once; a pipeline stage moves its own layers' biases). The bias is model state, not a trained
// parameter: no gradient, no optimizer, no ZeRO sharding, kept in checkpoints as it is.
#pragma once

#include <span>
#include <vector>

#include "core/checkpoint/model_state.h"
#include "core/model/llama.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

// The rule on one layer's bias (E) from its load (E).
void step_router_bias(std::vector<float>& bias, std::span<const double> load, double rate);

// Every MoE layer of this rank's after an optimizer step, from the loads its backward passes
// counted (MoeLoad) summed over `batch_group` (host communicator of the dp x cp ranks). A
// collective over that group; nothing without router biases.
void balance_router_biases(LlamaModel& model, Communicator& batch_group, double rate);

// The model state of `model` that checkpoints keep: its routing biases, and the FP8 scaling
// state `backend` keeps for it (core/step/fp8_layers.h); this rank saves what it holds when
// `saves` (one rank of the ranks that hold the same layers).
ModelState model_state_of(LlamaModel& model, Backend& backend, bool saves);

}  // namespace ustrain
