// One Llama decoder block: pre-norm attention and SwiGLU MLP, each around a residual add.
//
//   x_mid = x_in  + o_proj(attention(rope(qkv_proj(rmsnorm1(x_in)))))
//   x_out = x_mid + down_proj(swiglu(gate_up_proj(rmsnorm2(x_mid))))
//
// The block owns no memory: its activations and gradient workspace are views handed in by
// the model, which decides (through the recompute policy) which of them persist per layer
// and which are shared scratch.
#pragma once

#include <cstdint>

#include "core/model/params.h"
#include "core/model/recompute.h"
#include "core/recipe.h"

namespace ustrain {

// Activations of one block for N = B * S tokens (row-major, tokens first).
struct BlockActivations {
  Tensor ln1_rstd;  // (N)
  Tensor ln1_out;   // (N, D)
  Tensor qkv;       // (N, (H + 2 Hkv) Dh), q and k after RoPE
  Tensor att;       // (N, H Dh)
  Tensor lse;       // (B, H, S)
  Tensor x_mid;     // (N, D)
  Tensor ln2_rstd;  // (N)
  Tensor ln2_out;   // (N, D)
  Tensor gate_up;   // (N, 2F)
  Tensor act;       // (N, F)
};

// Gradient workspace shared by all blocks.
struct BlockGradients {
  Tensor d_resid;    // (N, D) running gradient of the residual stream (in: of x_out; out: of x_in)
  Tensor d_branch;   // (N, D)
  Tensor d_norm;     // (N, D)
  Tensor d_att;      // (N, H Dh)
  Tensor d_qkv;      // (N, (H + 2 Hkv) Dh)
  Tensor d_gate_up;  // (N, 2F)
  Tensor d_act;      // (N, F)
};

struct RopeTables {
  Tensor cos, sin;  // (S_max, Dh / 2)
};

class TransformerBlock {
 public:
  // Declares the block's parameters in `unit` of `params`.
  TransformerBlock(int layer, int unit, const ModelSection& cfg, ParamSet& params);

  // x_in, x_out (N, D); `branch` (N, D) is scratch for the o_proj / down_proj outputs.
  void forward(Backend& be, Tensor x_in, Tensor x_out, const BlockActivations& a, Tensor branch,
               const RopeTables& rope) const;
  // On entry g.d_resid holds dL/dx_out; on return dL/dx_in. Parameter gradients accumulate.
  void backward(Backend& be, Tensor x_in, const BlockActivations& a, const BlockGradients& g,
                Tensor branch, const RopeTables& rope, Recompute policy) const;

  int unit() const { return unit_; }

 private:
  int unit_;
  int n_heads_, n_kv_heads_;
  float eps_;
  int ln1_, q_, k_, v_, o_, ln2_, gate_, up_, down_;
  const ParamSet& params_;
};

}  // namespace ustrain
