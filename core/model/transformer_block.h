// One Llama decoder block: pre-norm attention and SwiGLU MLP, each around a residual add.
//
//   x_mid = x_in  + o_proj(attention(rope(qkv_proj(rmsnorm1(x_in)))))
//   x_out = x_mid + down_proj(swiglu(gate_up_proj(rmsnorm2(x_mid))))
//
// The block owns no memory: its activations and gradient workspace are views handed in by
// the model, which decides (through the recompute policy) which of them persist per layer
// and which are shared scratch.
//
// Tensor parallelism enters only through the TensorParallel object the block calls around
// its GEMMs (parallel/tensor_parallel.h): sizes below are this rank's (core/model/geometry.h):
// H, Hkv and F are its heads, kv heads and MLP width, and R its rows of the residual stream
// (N, or N / tp under sequence parallelism).
#pragma once

#include <cstdint>

#include "core/model/geometry.h"
#include "core/model/param_registry.h"
#include "core/model/recompute.h"
#include "core/recipe/recipe.h"
#include "parallel/tensor_parallel.h"

namespace ustrain {

// Activations of one block for N = B * S tokens (row-major, tokens first).
struct BlockActivations {
  Tensor ln1_rstd;  // (R)
  Tensor ln1_out;   // (R, D)
  Tensor qkv;       // (B, S, (H + 2 Hkv) Dh), q and k after RoPE
  Tensor att;       // (B, S, H Dh)
  Tensor lse;       // (B, H, S)
  Tensor x_mid;     // (R, D)
  Tensor ln2_rstd;  // (R)
  Tensor ln2_out;   // (R, D)
  Tensor gate_up;   // (N, 2F)
  Tensor act;       // (N, F)
};

// Workspace shared by all blocks.
struct BlockGradients {
  Tensor d_resid;    // (R, D) running gradient of the residual stream (in: of x_out; out: of x_in)
  Tensor d_branch;   // (R, D)
  Tensor d_norm;     // (R, D)
  Tensor d_att;      // (B, S, H Dh)
  Tensor d_qkv;      // (B, S, (H + 2 Hkv) Dh)
  Tensor d_gate_up;  // (N, 2F)
  Tensor d_act;      // (N, F)
  // Sequence parallelism only (empty otherwise): full rows (N, D) of gathered activations,
  // and of gathered gradients or partial input gradients.
  Tensor gathered, d_full;
};

// The gradients of the block's GEMM outputs, kept per micro-batch so that the weight
// gradients can be computed later (a zero-bubble schedule's W pass).
struct DeferredGrads {
  Tensor d_down;     // (N, D) gradient of the down_proj output (every row)
  Tensor d_gate_up;  // (N, 2F)
  Tensor d_o;        // (N, D) gradient of the o_proj output (every row)
  Tensor d_qkv;      // (B, S, (H + 2 Hkv) Dh)
};

struct RopeTables {
  Tensor cos, sin;  // (S_max, Dh / 2)
};

class TransformerBlock {
 public:
  // Declares the block's parameters (global shapes) in `unit` of `params`.
  TransformerBlock(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geometry,
                   ParamRegistry& params);

  // x_in, x_out (R, D); `branch` (N, D) is scratch for the o_proj / down_proj outputs (their
  // partial sums under tensor parallelism); g.gathered is the sequence-parallel scratch.
  void forward(Backend& be, TensorParallel& tp, Tensor x_in, Tensor x_out, const BlockActivations& a,
               const BlockGradients& g, Tensor branch, const RopeTables& rope) const;
  // On entry g.d_resid holds dL/dx_out; on return dL/dx_in. Parameter gradients accumulate;
  // with `defer`, the GEMMs' weight gradients are left for backward_weight(), their output
  // gradients kept in `defer` (needs every activation kept: Recompute::none).
  void backward(Backend& be, TensorParallel& tp, Tensor x_in, const BlockActivations& a, const BlockGradients& g,
                Tensor branch, const RopeTables& rope, Recompute policy, const DeferredGrads* defer = nullptr) const;
  // The GEMMs' weight gradients left by backward(..., defer).
  void backward_weight(Backend& be, TensorParallel& tp, const BlockActivations& a, const BlockGradients& g,
                       const DeferredGrads& defer) const;

  UnitId unit() const { return unit_; }

 private:
  UnitId unit_;
  int n_heads_, n_kv_heads_, head_dim_;  // this rank's
  float eps_;
  int ln1_, q_, k_, v_, o_, ln2_, gate_, up_, down_;
  const ParamRegistry& params_;
};

}  // namespace ustrain
