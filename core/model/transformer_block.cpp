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

TransformerBlock::TransformerBlock(int layer, int unit, const ModelSection& cfg, ParamSet& params)
    : unit_(unit),
      n_heads_(static_cast<int>(cfg.n_heads)),
      n_kv_heads_(static_cast<int>(cfg.n_kv_heads)),
      eps_(static_cast<float>(cfg.norm_eps)),
      params_(params) {
  const std::int64_t d = cfg.d_model, dh = cfg.d_model / cfg.n_heads, f = cfg.ffn_hidden;
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const double std = cfg.init_std;
  // Residual projections are scaled by depth so the residual stream's variance stays
  // bounded as layers are added (the GPT-2 / Megatron convention).
  const double out_std = cfg.init_std / std::sqrt(2.0 * static_cast<double>(cfg.n_layers));
  q_ = params.declare({p + "self_attn.q_proj.weight", Shape{n_heads_ * dh, d}, true, false, std, unit});
  k_ = params.declare({p + "self_attn.k_proj.weight", Shape{n_kv_heads_ * dh, d}, true, true, std, unit});
  v_ = params.declare({p + "self_attn.v_proj.weight", Shape{n_kv_heads_ * dh, d}, true, true, std, unit});
  o_ = params.declare({p + "self_attn.o_proj.weight", Shape{d, n_heads_ * dh}, true, false, out_std, unit});
  gate_ = params.declare({p + "mlp.gate_proj.weight", Shape{f, d}, true, false, std, unit});
  up_ = params.declare({p + "mlp.up_proj.weight", Shape{f, d}, true, true, std, unit});
  down_ = params.declare({p + "mlp.down_proj.weight", Shape{d, f}, true, false, out_std, unit});
  ln1_ = params.declare({p + "input_layernorm.weight", Shape{d}, false, false, 0.0, unit});
  ln2_ = params.declare({p + "post_attention_layernorm.weight", Shape{d}, false, false, 0.0, unit});
}

void TransformerBlock::forward(Backend& be, Tensor x_in, Tensor x_out, const BlockActivations& a,
                               Tensor branch, const RopeTables& rope) const {
  const int dh = static_cast<int>(a.qkv.shape.last() / (n_heads_ + 2 * n_kv_heads_));
  // Attention half.
  be.rmsnorm_forward(a.ln1_out, a.ln1_rstd, x_in, params_[ln1_].value, eps_);
  be.linear_forward(a.qkv.view(Shape{a.qkv.shape.rows(), a.qkv.shape.last()}), a.ln1_out,
                    params_.packed_value(q_, v_));
  be.rope_forward(a.qkv, rope.cos, rope.sin, n_heads_ + n_kv_heads_, dh);
  be.attention_forward(a.att, a.lse, a.qkv, n_heads_, n_kv_heads_);
  be.linear_forward(branch, a.att.view(Shape{a.att.shape.rows(), a.att.shape.last()}), params_[o_].value);
  be.add(a.x_mid, x_in, branch);
  // MLP half.
  be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, a.x_mid, params_[ln2_].value, eps_);
  be.linear_forward(a.gate_up, a.ln2_out, params_.packed_value(gate_, up_));
  be.swiglu_forward(a.act, a.gate_up);
  be.linear_forward(branch, a.act, params_[down_].value);
  be.add(x_out, a.x_mid, branch);
}

void TransformerBlock::backward(Backend& be, Tensor x_in, const BlockActivations& a,
                                const BlockGradients& g, Tensor branch, const RopeTables& rope,
                                Recompute policy) const {
  if (policy == Recompute::full) {
    // Only x_in was kept: rebuild every activation (x_out goes to scratch, unused).
    forward(be, x_in, branch, a, branch, rope);
  } else if (policy == Recompute::selective) {
    be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, a.x_mid, params_[ln2_].value, eps_);
    be.swiglu_forward(a.act, a.gate_up);
  }
  const Shape att2d{a.att.shape.rows(), a.att.shape.last()};
  const Shape qkv2d{a.qkv.shape.rows(), a.qkv.shape.last()};
  const int dh = static_cast<int>(a.qkv.shape.last() / (n_heads_ + 2 * n_kv_heads_));

  // MLP half: d_resid is dL/dx_out = dL/d(mlp branch).
  be.linear_backward(g.d_act, params_[down_].grad, g.d_resid, a.act, params_[down_].value);
  be.swiglu_backward(g.d_gate_up, g.d_act, a.gate_up);
  be.linear_backward(g.d_norm, params_.packed_grad(gate_, up_), g.d_gate_up, a.ln2_out,
                     params_.packed_value(gate_, up_));
  be.rmsnorm_backward(g.d_branch, params_[ln2_].grad, g.d_norm, a.x_mid, params_[ln2_].value, a.ln2_rstd);
  be.add(g.d_resid, g.d_resid, g.d_branch);  // now dL/dx_mid

  // Attention half.
  if (policy == Recompute::selective)
    be.rmsnorm_forward(a.ln1_out, a.ln1_rstd, x_in, params_[ln1_].value, eps_);
  be.linear_backward(g.d_att.view(att2d), params_[o_].grad, g.d_resid, a.att.view(att2d), params_[o_].value);
  be.attention_backward(g.d_qkv, g.d_att, a.qkv, a.att, a.lse, n_heads_, n_kv_heads_);
  be.rope_backward(g.d_qkv, rope.cos, rope.sin, n_heads_ + n_kv_heads_, dh);
  be.linear_backward(g.d_norm, params_.packed_grad(q_, v_), g.d_qkv.view(qkv2d), a.ln1_out,
                     params_.packed_value(q_, v_));
  be.rmsnorm_backward(g.d_branch, params_[ln1_].grad, g.d_norm, x_in, params_[ln1_].value, a.ln1_rstd);
  be.add(g.d_resid, g.d_resid, g.d_branch);  // now dL/dx_in
}

}  // namespace ustrain
