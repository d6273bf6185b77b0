// The views a mixture-of-experts layer takes of its planned tensors for one micro-batch
// (core/model/moe_mlp.h, whose two source files share them: the layer's passes in
// moe_mlp.cpp, what it plans and how it finds it by name in moe_memory.cpp).
#pragma once

#include "core/model/moe_mlp.h"
#include "parallel/expert_dispatch.h"

namespace ustrain {

// The planned tensors of one micro-batch, by name (sizes in moe_mlp.h).
struct MoeMlp::Views {
  Tensor ln2_rstd;     // (R)
  Tensor ln2_out;      // (R, D)
  Tensor logits;       // (N, E)
  Tensor probs;        // (N, E) fp32
  Tensor lse;          // (N) fp32
  Tensor experts;      // (N, k) i32
  Tensor gates;        // (N, k) fp32
  Tensor slot_token;   // (N k) i32
  Tensor token_slot;   // (N k) i32
  Tensor x_perm;       // (N k, D): the tokens in expert order
  Tensor gate_up;      // (N k, 2F)
  Tensor act;          // (N k, F)
  Tensor rows_out;     // (N k, D): the experts' outputs in token order
  Tensor sh_gate_up;   // (N, 2 Fs)
  Tensor sh_act;       // (N, Fs)
  // Workspace.
  Tensor expert_out;   // (N k, D): outputs, then their gradients, in expert order
  Tensor d_rows;       // (N k, D): gradients of rows_out
  Tensor d_act;        // (N k, F)
  Tensor d_gate_up;    // (N k, 2F): deferred (kept for the weight pass) or workspace
  Tensor d_x_perm;     // (N k, D)
  Tensor d_gates;      // (N, k) fp32
  Tensor d_logits;     // (N, E): deferred or workspace
  Tensor partial;      // (N, D)
  Tensor sh_d_act;     // (N, Fs)
  Tensor sh_d_gate_up;  // (N, 2 Fs): deferred or workspace
  Tensor d_y;          // (N, D) deferred only: the gradient of the MLP's output (every row)
  Tensor router_bias;  // (E) fp32: the routing bias, where balancing has one
  Tensor seq_grad;     // (B, E) fp32: the sequence-level balance loss's gradient, where on
  // Expert parallelism's workspace (ep > 1), C = the dispatch capacity's rows.
  DispatchBuffers dispatch;  // send (N k, D); recv, recv_grad, result (C, D); tp > 1: gathered (G, D)
  Tensor ep_gate_up;         // (C, 2F): a run's expert activations, recomputed in backward
  Tensor ep_act;             // (C, F)
  Tensor ep_d_act;           // (C, F)
  Tensor ep_d_gate_up;       // (C, 2F)
  bool deferred = false;
};

}  // namespace ustrain
