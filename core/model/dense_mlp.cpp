#include "core/model/dense_mlp.h"

namespace ustrain {

// The planned tensors of one micro-batch, by name (sizes in dense_mlp.h).
struct DenseMlp::Views {
  Tensor ln2_rstd;   // (R)
  Tensor ln2_out;    // (R, D)
  Tensor gate_up;    // (N, 2F)
  Tensor act;        // (N, F)
  Tensor d_act;      // (N, F)
  Tensor d_gate_up;  // (N, 2F): deferred (kept for the weight pass) or workspace
  Tensor d_down;     // (N, D) deferred only: the gradient of the down_proj output (every row)
  bool deferred = false;
};

DenseMlp::DenseMlp(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geo, ParamRegistry& params)
    : geo_(geo), layer_(layer), unit_(unit), eps_(static_cast<float>(cfg.norm_eps)), params_(params) {
  const std::int64_t d = geo.d_model, f = geo.ffn;
  const std::string p = layer_prefix(layer);
  const double std = cfg.init_std, out_std = residual_init_std(cfg);
  gate_ = params.declare({p + "mlp.gate_proj.weight", Shape{f, d}, true, false, std, unit});
  up_ = params.declare({p + "mlp.up_proj.weight", Shape{f, d}, true, true, std, unit});
  down_ = params.declare({p + "mlp.down_proj.weight", Shape{d, f}, true, false, out_std, unit});
}

void DenseMlp::declare_norm(ParamRegistry& params) {
  const std::int64_t d = geo_.d_model;
  const std::string p = layer_prefix(layer_);
  const UnitId unit = unit_;
  ln2_ = params.declare({p + "post_attention_layernorm.weight", Shape{d}, false, false, 0.0, unit});
}

std::vector<ActivationSpec> DenseMlp::activations(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch), r = geo_.rows(n), f = geo_.ffn_local;
  return {{"ln2_rstd", Shape{r}, DType::f32},
          {"ln2_out", Shape{r, geo_.d_model}, c, /*cheap=*/true},
          {"gate_up", Shape{n, 2 * f}, c},
          {"swiglu_out", Shape{n, f}, c, /*cheap=*/true}};
}

std::vector<ActivationSpec> DenseMlp::deferred(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch);
  return {{"grad.down_out", Shape{n, geo_.d_model}, c}, {"grad.gate_up", Shape{n, 2 * geo_.ffn_local}, c}};
}

std::vector<ActivationSpec> DenseMlp::workspace(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch), f = geo_.ffn_local;
  return {{"grad.gate_up", Shape{n, 2 * f}, c}, {"grad.swiglu_out", Shape{n, f}, c}};
}

DenseMlp::Views DenseMlp::views(const SubLayerMemory& m) const {
  const std::int64_t n = m.batch * m.seq, r = geo_.rows(n);
  Views v;
  v.ln2_rstd = first_rows(m.activations.at(0), r);
  v.ln2_out = first_rows(m.activations.at(1), r);
  v.gate_up = first_rows(m.activations.at(2), n);
  v.act = first_rows(m.activations.at(3), n);
  v.d_act = first_rows(m.workspace.at(1), n);
  v.deferred = !m.deferred.empty();
  if (v.deferred) {
    v.d_down = first_rows(m.deferred.at(0), n);
    v.d_gate_up = first_rows(m.deferred.at(1), n);
  } else {
    v.d_gate_up = first_rows(m.workspace.at(0), n);
  }
  return v;
}

Tensor DenseMlp::forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                         const BlockScratch& s) const {
  const Views a = views(m);
  be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, x, params_[ln2_].value, eps_);  // (R, D)
  const Tensor ln2 = par.tp.gather(a.ln2_out, s.gathered);                 // (N, D)
  be.linear_forward(a.gate_up, ln2, params_.packed_value(gate_, up_));      // (N, 2F)
  be.swiglu_forward(a.act, a.gate_up);                                      // (N, F)
  be.linear_forward(s.branch, a.act, params_[down_].value);                 // (N, D), partial over tp
  return par.tp.reduce(s.branch, out);                                      // (R, D)
}

void DenseMlp::backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m,
                        const BlockScratch& s, Recompute policy) const {
  const Views a = views(m);
  if (policy == Recompute::selective) {
    be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, x, params_[ln2_].value, eps_);
    be.swiglu_forward(a.act, a.gate_up);
  }
  const Tensor d_out = par.tp.gather(s.d_resid, s.d_full);  // (N, D)
  be.linear_backward_input(a.d_act, d_out, params_[down_].value);
  if (a.deferred) be.copy(a.d_down, d_out);
  else be.linear_backward_weight(params_[down_].grad, d_out, a.act);
  be.swiglu_backward(a.d_gate_up, a.d_act, a.gate_up);
  const Tensor d_part = par.tp.partial_buffer(s.d_norm, s.d_full);
  be.linear_backward_input(d_part, a.d_gate_up, params_.packed_value(gate_, up_));
  if (!a.deferred)  // ln2 gathered again: only this rank's rows were kept
    be.linear_backward_weight(params_.packed_grad(gate_, up_), a.d_gate_up, par.tp.gather(a.ln2_out, s.gathered));
  const Tensor d_ln2 = par.tp.reduce(d_part, s.d_norm);  // (R, D)
  be.rmsnorm_backward(s.d_branch, params_[ln2_].grad, d_ln2, x, params_[ln2_].value, a.ln2_rstd);
}

void DenseMlp::backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                               const BlockScratch& s) const {
  const Views a = views(m);
  be.linear_backward_weight(params_[down_].grad, a.d_down, a.act);
  be.linear_backward_weight(params_.packed_grad(gate_, up_), a.d_gate_up, par.tp.gather(a.ln2_out, s.gathered));
}

}  // namespace ustrain
