#include "core/model/transformer_block.h"

#include <cmath>

namespace ustrain {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw UserError("train.recompute must be none, selective or full (got \"" + name + "\")");
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

TransformerBlock::TransformerBlock(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geo,
                                   ParamRegistry& params)
    : unit_(unit),
      n_heads_(static_cast<int>(geo.heads)),
      n_kv_heads_(static_cast<int>(geo.kv_heads)),
      head_dim_(static_cast<int>(geo.head_dim)),
      eps_(static_cast<float>(cfg.norm_eps)),
      params_(params) {
  const std::int64_t d = geo.d_model, dh = geo.head_dim, f = geo.ffn, h = geo.n_heads, hkv = geo.n_kv_heads;
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const double std = cfg.init_std;
  // Residual projections are scaled by depth so the residual stream's variance stays
  // bounded as layers are added (the GPT-2 / Megatron convention).
  const double out_std = cfg.init_std / std::sqrt(2.0 * static_cast<double>(cfg.n_layers));
  q_ = params.declare({p + "self_attn.q_proj.weight", Shape{h * dh, d}, true, false, std, unit});
  k_ = params.declare({p + "self_attn.k_proj.weight", Shape{hkv * dh, d}, true, true, std, unit});
  v_ = params.declare({p + "self_attn.v_proj.weight", Shape{hkv * dh, d}, true, true, std, unit});
  o_ = params.declare({p + "self_attn.o_proj.weight", Shape{d, h * dh}, true, false, out_std, unit});
  gate_ = params.declare({p + "mlp.gate_proj.weight", Shape{f, d}, true, false, std, unit});
  up_ = params.declare({p + "mlp.up_proj.weight", Shape{f, d}, true, true, std, unit});
  down_ = params.declare({p + "mlp.down_proj.weight", Shape{d, f}, true, false, out_std, unit});
  ln1_ = params.declare({p + "input_layernorm.weight", Shape{d}, false, false, 0.0, unit});
  ln2_ = params.declare({p + "post_attention_layernorm.weight", Shape{d}, false, false, 0.0, unit});
}

void TransformerBlock::forward(Backend& be, TensorParallel& tp, Tensor x_in, Tensor x_out, const BlockActivations& a,
                               const BlockGradients& g, Tensor branch, const RopeTables& rope) const {
  const Shape att2d{a.att.shape.rows(), a.att.shape.last()};
  const Shape qkv2d{a.qkv.shape.rows(), a.qkv.shape.last()};
  // Attention half: column-parallel q/k/v on this rank's heads, row-parallel o_proj.
  be.rmsnorm_forward(a.ln1_out, a.ln1_rstd, x_in, params_[ln1_].value, eps_);  // (R, D)
  const Tensor ln1 = tp.gather(a.ln1_out, g.gathered);                         // (N, D)
  be.linear_forward(a.qkv.view(qkv2d), ln1, params_.packed_value(q_, v_));      // (N, W)
  be.rope_forward(a.qkv, rope.cos, rope.sin, n_heads_ + n_kv_heads_, head_dim_);
  be.attention_forward(a.att, a.lse, a.qkv, n_heads_, n_kv_heads_);              // (B, S, H Dh)
  be.linear_forward(branch, a.att.view(att2d), params_[o_].value);              // (N, D), partial over tp
  be.add(a.x_mid, x_in, tp.reduce(branch, a.x_mid));                            // (R, D)
  // MLP half: column-parallel gate/up on this rank's hidden units, row-parallel down_proj.
  be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, a.x_mid, params_[ln2_].value, eps_);
  const Tensor ln2 = tp.gather(a.ln2_out, g.gathered);
  be.linear_forward(a.gate_up, ln2, params_.packed_value(gate_, up_));  // (N, 2F)
  be.swiglu_forward(a.act, a.gate_up);                                  // (N, F)
  be.linear_forward(branch, a.act, params_[down_].value);               // (N, D), partial over tp
  be.add(x_out, a.x_mid, tp.reduce(branch, x_out));
}

void TransformerBlock::backward(Backend& be, TensorParallel& tp, Tensor x_in, const BlockActivations& a,
                                const BlockGradients& g, Tensor branch, const RopeTables& rope, Recompute policy,
                                const DeferredGrads* defer) const {
  USTRAIN_ASSERT(defer == nullptr || policy == Recompute::none, "deferred weight gradients need every activation kept");
  if (policy == Recompute::full) {
    // Only x_in was kept: rebuild every activation (x_out goes to d_branch, free until the
    // norm backward below writes it).
    forward(be, tp, x_in, g.d_branch, a, g, branch, rope);
  } else if (policy == Recompute::selective) {
    be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, a.x_mid, params_[ln2_].value, eps_);
    be.swiglu_forward(a.act, a.gate_up);
  }
  const Shape att2d{a.att.shape.rows(), a.att.shape.last()};
  const Shape qkv2d{a.qkv.shape.rows(), a.qkv.shape.last()};

  // MLP half: d_resid is dL/dx_out = dL/d(mlp branch).
  Tensor d_out = tp.gather(g.d_resid, g.d_full);  // (N, D)
  be.linear_backward_input(g.d_act, d_out, params_[down_].value);
  if (defer) be.copy(defer->d_down, d_out);
  else be.linear_backward_weight(params_[down_].grad, d_out, a.act);
  const Tensor d_gate_up = defer ? defer->d_gate_up : g.d_gate_up;  // (N, 2F)
  be.swiglu_backward(d_gate_up, g.d_act, a.gate_up);
  Tensor d_part = tp.partial_buffer(g.d_norm, g.d_full);
  be.linear_backward_input(d_part, d_gate_up, params_.packed_value(gate_, up_));
  if (!defer)  // ln2 gathered again: only this rank's rows were kept
    be.linear_backward_weight(params_.packed_grad(gate_, up_), d_gate_up, tp.gather(a.ln2_out, g.gathered));
  const Tensor d_ln2 = tp.reduce(d_part, g.d_norm);  // (R, D)
  be.rmsnorm_backward(g.d_branch, params_[ln2_].grad, d_ln2, a.x_mid, params_[ln2_].value, a.ln2_rstd);
  be.add(g.d_resid, g.d_resid, g.d_branch);  // now dL/dx_mid

  // Attention half.
  if (policy == Recompute::selective)
    be.rmsnorm_forward(a.ln1_out, a.ln1_rstd, x_in, params_[ln1_].value, eps_);
  d_out = tp.gather(g.d_resid, g.d_full);
  be.linear_backward_input(g.d_att.view(att2d), d_out, params_[o_].value);
  if (defer) be.copy(defer->d_o, d_out);
  else be.linear_backward_weight(params_[o_].grad, d_out, a.att.view(att2d));
  const Tensor d_qkv = defer ? defer->d_qkv : g.d_qkv;  // (B, S, W)
  be.attention_backward(d_qkv, g.d_att, a.qkv, a.att, a.lse, n_heads_, n_kv_heads_);
  be.rope_backward(d_qkv, rope.cos, rope.sin, n_heads_ + n_kv_heads_, head_dim_);
  d_part = tp.partial_buffer(g.d_norm, g.d_full);
  be.linear_backward_input(d_part, d_qkv.view(qkv2d), params_.packed_value(q_, v_));
  if (!defer)
    be.linear_backward_weight(params_.packed_grad(q_, v_), d_qkv.view(qkv2d), tp.gather(a.ln1_out, g.gathered));
  const Tensor d_ln1 = tp.reduce(d_part, g.d_norm);
  be.rmsnorm_backward(g.d_branch, params_[ln1_].grad, d_ln1, x_in, params_[ln1_].value, a.ln1_rstd);
  be.add(g.d_resid, g.d_resid, g.d_branch);  // now dL/dx_in
}

void TransformerBlock::backward_weight(Backend& be, TensorParallel& tp, const BlockActivations& a,
                                       const BlockGradients& g, const DeferredGrads& d) const {
  const Shape att2d{a.att.shape.rows(), a.att.shape.last()};
  const Shape qkv2d{d.d_qkv.shape.rows(), d.d_qkv.shape.last()};
  be.linear_backward_weight(params_[down_].grad, d.d_down, a.act);
  be.linear_backward_weight(params_.packed_grad(gate_, up_), d.d_gate_up, tp.gather(a.ln2_out, g.gathered));
  be.linear_backward_weight(params_[o_].grad, d.d_o, a.att.view(att2d));
  be.linear_backward_weight(params_.packed_grad(q_, v_), d.d_qkv.view(qkv2d), tp.gather(a.ln1_out, g.gathered));
}

}  // namespace ustrain
