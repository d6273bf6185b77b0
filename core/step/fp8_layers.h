// train.precision = "fp8" seen from training: which GEMMs compute in FP8, and their scaling
// state as model state that checkpoints keep (core/checkpoint/model_state.h).
//
// The FP8 layers are the decoder layers' linear layers: the 2-D parameters of layer and
// expert units (a packed q/k/v or gate/up matrix once, under its first parameter's name),
// MoE routers excepted. The output head (and a tied embedding) and the routers stay in bf16,
// as TransformerEngine and torchao recipes usually keep them.
//
// Delayed scaling's amaxes are the largest over every rank that holds the same layers (the
// data-, context- and tensor-parallel ranks of a pipeline stage), as TransformerEngine reduces
// them, so the state is the same on each of them: one saves it, and all of them load it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/model_state.h"
#include "core/memory/memory_plan.h"
#include "core/model/llama.h"
#include "core/model/params.h"
#include "core/recipe/recipe.h"
#include "kernels/backend.h"
#include "parallel/process_groups.h"

namespace ustrain {

// The checkpoint name of a layer's state: "<weight name>.fp8_scaling" for the GEMMs keyed by
// its weight (forward, input gradient), "<weight name>.fp8_wgrad_scaling" for its
// weight-gradient GEMM.
std::string fp8_state_name(const std::string& weight, bool wgrad);

// Adds this rank's FP8 layers to the backend (nothing when it computes none in FP8), keyed
// by their value and gradient views, and keeps the keys on the views as they move (ZeRO-2
// binds gradients, ZeRO-3 values, into reused buffers: ParamRegistry::on_view_moved), so a
// layer's state is its own on every layout. After the parameters are bound.
void add_fp8_layers(ModelParams& params, Backend& backend);

// Every FP8 scaling state of the whole model (`whole_model`: ModelParams::whole_model()) for a
// backend's recipe: names and shapes; none unless the recipe keeps state.
std::vector<ParamDecl> fp8_state_declaration(const std::vector<ParamDecl>& whole_model, const Backend& backend);

// The memory plan's FP8 lines for this rank's part of `model`, for micro-batches of
// `micro_batch` sequences (nothing unless train.precision = "fp8"): the host buffers of the
// delayed-scaling state ("fp8.scaling_state", 12 (history + 2) bytes per layer and GEMM key)
// and of the CPU emulation's fp32 copies of a GEMM's two quantised operands and its result
// ("fp8.cpu_operands", three times the largest operand of an FP8 GEMM).
void plan_fp8(const Recipe& recipe, const LlamaModel& model, std::int64_t micro_batch, MemoryPlan& plan);

// The op scratch the CUDA FP8 GEMMs of `model` take at most (their quantised operands,
// kernels/cuda/fp8/fp8_scratch_sizes.h): the plan's op scratch holds at least this much (0 unless
// train.precision = "fp8" on CUDA).
std::size_t fp8_op_scratch_bytes(const Recipe& recipe, const LlamaModel& model, std::int64_t micro_batch);

// After a step's backward: the step's amaxes, reduced over the ranks that hold the same
// layers, into the delayed-scaling histories. A collective over `groups`' gradient and
// tensor-parallel groups; nothing on a backend without FP8 layers.
void end_fp8_step(Backend& backend, ProcessGroups& groups);

}  // namespace ustrain
