#include "core/model/moe_mlp.h"

#include <optional>

#include "core/model/expert_order.h"
#include "core/model/moe_views.h"
#include "core/model/sequence_balance.h"
#include "kernels/scoped_seconds.h"

namespace ustrain {

// This rank's experts as the dispatcher runs them. Dispatched rows (ep > 1) come in runs of at
// most C rows, with scratch for their activations, recomputed in backward. In a group of one
// (ep = 1) every expert runs at once on the planned activations, which backward reads (selective
// recompute rebuilding the SwiGLU's output first), with the weight gradients deferred under a
// split backward.
class MoeMlp::Experts final : public ExpertCompute {
 public:
  Experts(const MoeMlp& mlp, const Views& a, Recompute policy = Recompute::none)
      : mlp_(mlp), a_(a), policy_(policy) {}

  void forward(Backend& be, int expert, Tensor out, Tensor in) override {
    const ExpertParams& w = local(expert);
    const std::int64_t c = in.shape[0];
    const Tensor gate_up = first_rows(a_.ep_gate_up, c), act = first_rows(a_.ep_act, c);
    be.linear_forward(gate_up, in, mlp_.params_.packed_value(w.gate, w.up));  // (c, 2F)
    be.swiglu_forward(act, gate_up);                                          // (c, F)
    be.linear_forward(out, act, mlp_.params_[w.down].value);                  // (c, D), partial over tp
  }

  void backward(Backend& be, int expert, Tensor d_in, Tensor d_out, Tensor in) override {
    const ExpertParams& w = local(expert);
    const std::int64_t c = in.shape[0];
    const Tensor gate_up = first_rows(a_.ep_gate_up, c), act = first_rows(a_.ep_act, c);
    const Tensor d_act = first_rows(a_.ep_d_act, c), d_gate_up = first_rows(a_.ep_d_gate_up, c);
    const Tensor packed = mlp_.params_.packed_value(w.gate, w.up);
    be.linear_forward(gate_up, in, packed);  // recomputed: the rows were not kept
    be.swiglu_forward(act, gate_up);
    be.linear_backward_input(d_act, d_out, mlp_.params_[w.down].value);  // (c, F)
    be.swiglu_backward(d_gate_up, d_act, gate_up);                       // (c, 2F)
    be.linear_backward_input(d_in, d_gate_up, packed);                   // (c, D), partial over tp
    be.linear_backward_weight(mlp_.params_[w.down].grad, d_out, act);
    be.linear_backward_weight(mlp_.params_.packed_grad(w.gate, w.up), d_gate_up, in);
  }

  void forward_all(Backend& be, std::span<const std::int64_t> counts, Tensor out, Tensor in) override {
    const std::vector<std::int64_t> at = offsets(counts);
    be.grouped_linear_forward(a_.gate_up, in, mlp_.experts_gate_up(false), at);  // (N k, 2F)
    be.swiglu_forward(a_.act, a_.gate_up);                                      // (N k, F)
    be.grouped_linear_forward(out, a_.act, mlp_.experts_down(false), at);       // (N k, D), partial over tp
  }

  void backward_all(Backend& be, std::span<const std::int64_t> counts, Tensor d_in, Tensor d_out, Tensor in) override {
    const std::vector<std::int64_t> at = offsets(counts);
    if (policy_ == Recompute::selective) be.swiglu_forward(a_.act, a_.gate_up);
    be.grouped_linear_backward_input(a_.d_act, d_out, mlp_.experts_down(false), at);  // (N k, F)
    be.swiglu_backward(a_.d_gate_up, a_.d_act, a_.gate_up);                        // (N k, 2F)
    be.grouped_linear_backward_input(d_in, a_.d_gate_up, mlp_.experts_gate_up(false), at);  // (N k, D)
    if (!a_.deferred) weight_grads(be, at, d_out, in);
  }

  void backward_weight_all(Backend& be, std::span<const std::int64_t> counts) override {
    weight_grads(be, offsets(counts), a_.expert_out, a_.x_perm);
  }

 private:
  void weight_grads(Backend& be, const std::vector<std::int64_t>& at, Tensor d_out, Tensor in) const {
    be.grouped_linear_backward_weight(mlp_.experts_down(true), d_out, a_.act, at);
    be.grouped_linear_backward_weight(mlp_.experts_gate_up(true), a_.d_gate_up, in, at);
  }
  // Where each expert's rows begin (E + 1), from their counts.
  static std::vector<std::int64_t> offsets(std::span<const std::int64_t> counts) {
    std::vector<std::int64_t> at{0};
    for (std::int64_t c : counts) at.push_back(at.back() + c);
    return at;
  }
  const ExpertParams& local(int expert) const {
    const std::int64_t i = expert - mlp_.geo_.experts_first;
    USTRAIN_ASSERT(i >= 0 && i < static_cast<std::int64_t>(mlp_.experts_.size()),
                   "expert " + std::to_string(expert) + " dispatched to a rank that does not hold it");
    return mlp_.experts_[static_cast<std::size_t>(i)];
  }
  const MoeMlp& mlp_;
  const Views& a_;
  Recompute policy_;
};

MoeMlp::MoeMlp(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geo, ParamRegistry& params)
    : geo_(geo),
      layer_(layer),
      unit_(unit),
      eps_(static_cast<float>(cfg.norm_eps)),
      routing_{static_cast<int>(geo.top_k), cfg.router_score == "sigmoid", cfg.router_renormalize},
      z_loss_(static_cast<float>(cfg.router_z_loss)),
      seq_aux_(static_cast<float>(cfg.router_seq_aux_loss)),
      bias_on_(cfg.router_bias_update_rate > 0),
      bias_{layer, layer_prefix(layer) + "mlp.gate.e_score_correction_bias",
            std::vector<float>(static_cast<std::size_t>(geo.n_experts), 0.0f)},
      params_(params) {
  const std::int64_t d = geo.d_model, f = geo.expert_ffn, fs = geo.shared_ffn;
  const std::string p = layer_prefix(layer) + "mlp.";
  const double std = cfg.init_std, out_std = residual_init_std(cfg);
  router_ = params.declare({p + "gate.weight", Shape{geo.n_experts, d}, true, false, std, unit});
  // This rank's experts, under their global names, in a unit of the expert sync group.
  const UnitId experts_unit = UnitId::experts(layer);
  const SyncGroup sync = SyncGroup::experts;
  for (std::int64_t e = geo.experts_first; e < geo.experts_first + geo.experts_local; ++e) {
    const std::string q = p + "experts." + std::to_string(e) + ".";
    ExpertParams w{};
    w.gate = params.declare({q + "gate_proj.weight", Shape{f, d}, true, false, std, experts_unit, sync});
    w.up = params.declare({q + "up_proj.weight", Shape{f, d}, true, true, std, experts_unit, sync});
    w.down = params.declare({q + "down_proj.weight", Shape{d, f}, true, false, out_std, experts_unit, sync});
    experts_.push_back(w);
  }
  if (fs > 0) {
    shared_.gate = params.declare({p + "shared_experts.gate_proj.weight", Shape{fs, d}, true, false, std, unit});
    shared_.up = params.declare({p + "shared_experts.up_proj.weight", Shape{fs, d}, true, true, std, unit});
    shared_.down = params.declare({p + "shared_experts.down_proj.weight", Shape{d, fs}, true, false, out_std, unit});
  }
  activation_names_ = names_of(activations(1, DType::f32));
  deferred_names_ = names_of(deferred(1, DType::f32));
  workspace_names_ = names_of(workspace(1, DType::f32));
}

void MoeMlp::declare_norm(ParamRegistry& params) {
  ln2_ = params.declare(
      {layer_prefix(layer_) + "post_attention_layernorm.weight", Shape{geo_.d_model}, false, false, 0.0, unit_});
}

std::vector<Tensor> MoeMlp::experts_gate_up(bool grads) const {
  std::vector<Tensor> w;
  w.reserve(experts_.size());
  for (const ExpertParams& e : experts_)
    w.push_back(grads ? params_.packed_grad(e.gate, e.up) : params_.packed_value(e.gate, e.up));
  return w;
}

std::vector<Tensor> MoeMlp::experts_down(bool grads) const {
  std::vector<Tensor> w;
  w.reserve(experts_.size());
  for (const ExpertParams& e : experts_) w.push_back(grads ? params_[e.down].grad : params_[e.down].value);
  return w;
}

void MoeMlp::route(Backend& be, const Views& a, Tensor ln2, RoutedTokens& r) const {
  be.linear_forward(a.logits, ln2, params_[router_].value);  // (N, E)
  if (bias_on_) be.copy(a.router_bias, Tensor(const_cast<float*>(bias_.values.data()), a.router_bias.shape));
  be.moe_route(a.experts, a.gates, a.probs, a.lse, a.logits, routing_, a.router_bias);
  r.chosen.resize(static_cast<std::size_t>(a.experts.numel()));
  be.copy(Tensor(r.chosen.data(), a.experts.shape, DType::i32), a.experts);  // the micro-batch's one copy
  const ExpertOrder order = expert_order(r.chosen, geo_.n_experts, geo_.top_k);
  r.counts = order.counts;
  be.copy(a.slot_token, Tensor(const_cast<std::int32_t*>(order.slot_token.data()), a.slot_token.shape, DType::i32));
  be.copy(a.token_slot, Tensor(const_cast<std::int32_t*>(order.token_slot.data()), a.token_slot.shape, DType::i32));
  be.embedding_forward(a.x_perm, a.slot_token, ln2);  // (N k, D) in expert order
}

namespace {

// A dispatch's rounds and exposed wait into the load.
void record(MoeLoad* load, const DispatchStats& stats) {
  if (!load) return;
  load->extra_rounds += stats.extra_rounds;
  load->ep_wait_seconds += stats.wait_seconds;
}

}  // namespace

Tensor MoeMlp::forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                       const BlockScratch& s) const {
  USTRAIN_ASSERT(par.ep.members() == geo_.ep, "an MoE layer planned for ep = " + std::to_string(geo_.ep) +
                                                  " run with an ep group of " + std::to_string(par.ep.members()));
  const Views a = views(m);
  RoutedTokens unrecorded;  // decoding keeps no record
  RoutedTokens& r = m.routed ? *m.routed : unrecorded;
  double untimed = 0;
  double& seconds = r.load ? r.load->routing_seconds : untimed;
  be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, x, params_[ln2_].value, eps_);  // (R, D)
  const Tensor ln2 = par.tp.gather(a.ln2_out, s.gathered);                 // (N, D)
  std::optional<ScopedSeconds> routing(seconds);
  route(be, a, ln2, r);
  routing.reset();
  // The shared experts need none of the routed rows: under ep they run while those travel.
  const auto shared_forward = [&] {
    if (geo_.shared_ffn_local == 0) return;
    be.linear_forward(a.sh_gate_up, ln2, params_.packed_value(shared_.gate, shared_.up));  // (N, 2 Fs)
    be.swiglu_forward(a.sh_act, a.sh_gate_up);
    be.linear_forward(a.partial, a.sh_act, params_[shared_.down].value);  // (N, D), partial over tp
  };
  Experts experts(*this, a);
  record(r.load, par.ep.forward(be, experts, r.counts, a.x_perm, a.expert_out, a.dispatch, shared_forward));
  routing.emplace(seconds);
  be.embedding_forward(a.rows_out, a.token_slot, a.expert_out);  // (N k, D) in token order
  be.moe_combine(s.branch, a.rows_out, a.gates);                 // (N, D), partial over tp
  routing.reset();
  if (geo_.shared_ffn_local > 0) be.add(s.branch, s.branch, a.partial);
  return par.tp.reduce(s.branch, out);  // (R, D)
}

Tensor MoeMlp::balance_sequences(Backend& be, const LayerParallel& par, const Views& a, std::int64_t batch,
                                 const std::vector<std::int32_t>& chosen, float loss_grad, double& seq_aux_sum) const {
  // Each sequence's choices over its tokens on every cp rank (exact: small integers in fp32).
  std::vector<float> choices = sequence_choices(chosen, batch, geo_.n_experts, geo_.top_k);  // (B, E)
  const Tensor host_choices(choices.data(), a.seq_grad.shape);
  be.copy(a.seq_grad, host_choices);
  par.cp.sum(a.seq_grad);
  be.copy(host_choices, a.seq_grad);
  std::vector<float> probs(static_cast<std::size_t>(a.probs.numel()));  // (N, E)
  be.copy(Tensor(probs.data(), a.probs.shape), a.probs);
  const SequenceBalance balance =
      ustrain::sequence_balance(choices, probs, batch, geo_.n_experts, geo_.top_k, routing_.sigmoid, seq_aux_, loss_grad);
  seq_aux_sum += balance.value;
  be.copy(a.seq_grad, Tensor(const_cast<float*>(balance.score_grad.data()), a.seq_grad.shape));
  return a.seq_grad;
}

void MoeMlp::backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m, const BlockScratch& s,
                      Recompute policy) const {
  USTRAIN_ASSERT(m.routed != nullptr, "an MoE layer's backward needs the record of its forward's routing");
  const Views a = views(m);
  const RoutedTokens& r = *m.routed;
  MoeLoad unrecorded;
  MoeLoad& load = r.load ? *r.load : unrecorded;
  const bool shared = geo_.shared_ffn_local > 0;
  if (policy == Recompute::selective) be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, x, params_[ln2_].value, eps_);
  const Tensor ln2 = par.tp.gather(a.ln2_out, s.gathered);  // (N, D)
  std::optional<ScopedSeconds> routing(load.routing_seconds);
  if (policy == Recompute::selective) be.embedding_forward(a.x_perm, a.slot_token, ln2);
  routing.reset();
  if (policy == Recompute::selective && shared) be.swiglu_forward(a.sh_act, a.sh_gate_up);
  {  // the layer's load, and the z-loss of the tokens
    std::vector<float> lse(static_cast<std::size_t>(a.lse.numel()));
    be.copy(Tensor(lse.data(), a.lse.shape), a.lse);
    for (std::size_t e = 0; e < load.tokens.size(); ++e) load.tokens[e] += r.counts.at(e);
    load.rows += a.lse.numel();
    for (float l : lse) load.z_sum += static_cast<double>(l) * l;
  }

  // Everything that reads the gradient of the MLP's output first: under sp it shares its
  // buffer with the input gradient's partial sums.
  const Tensor d_y = par.tp.gather(s.d_resid, s.d_full);  // (N, D)
  routing.emplace(load.routing_seconds);
  be.moe_combine_backward(a.d_rows, a.d_gates, d_y, a.rows_out, a.gates);
  routing.reset();
  par.tp.sum(a.d_gates);  // each rank's rows_out were partial sums
  // The shared experts' backward up to their input gradient (into a.partial) needs none of the
  // routed rows: under ep it runs while those travel. It reads d_y, which the input gradient
  // below may overwrite (under sp they share a buffer), so it runs before that in any case.
  const auto shared_backward = [&] {
    if (!shared) return;
    be.linear_backward_input(a.sh_d_act, d_y, params_[shared_.down].value);
    if (a.deferred) be.copy(a.d_y, d_y);
    else be.linear_backward_weight(params_[shared_.down].grad, d_y, a.sh_act);
    be.swiglu_backward(a.sh_d_gate_up, a.sh_d_act, a.sh_gate_up);
    if (!a.deferred)
      be.linear_backward_weight(params_.packed_grad(shared_.gate, shared_.up), a.sh_d_gate_up, ln2);
    be.linear_backward_input(a.partial, a.sh_d_gate_up, params_.packed_value(shared_.gate, shared_.up));  // (N, D)
  };
  // The experts, in expert order.
  routing.emplace(load.routing_seconds);
  be.fill(a.expert_out, 0.0f);
  be.embedding_backward(a.expert_out, a.token_slot, a.d_rows);  // each slot receives its one row
  routing.reset();
  Experts experts(*this, a, policy);
  record(r.load, par.ep.backward(be, experts, r.counts, a.x_perm, a.expert_out, a.d_x_perm, a.dispatch,
                                 shared_backward));
  const Tensor seq_grad =
      seq_aux_ > 0 ? balance_sequences(be, par, a, m.batch, r.chosen, s.loss_grad, load.seq_aux_sum) : Tensor();
  const ScopedSeconds router(load.routing_seconds);  // the router's backward, and the rows back in token order
  router_and_input_backward(be, par, x, a, ln2, s, seq_grad);
}

void MoeMlp::router_and_input_backward(Backend& be, const LayerParallel& par, Tensor x, const Views& a, Tensor ln2,
                                       const BlockScratch& s, Tensor seq_grad) const {
  be.moe_route_backward(a.d_logits, a.d_gates, a.logits, a.probs, a.lse, a.experts, a.gates, routing_,
                        z_loss_ * s.loss_grad, seq_grad);
  if (!a.deferred) be.linear_backward_weight(params_[router_].grad, a.d_logits, ln2);
  // dL/d(ln2): the experts' inputs back in token order, the shared experts', the router's.
  const Tensor d_part = par.tp.partial_buffer(s.d_norm, s.d_full);  // (N, D)
  be.fill(d_part, 0.0f);
  be.embedding_backward(d_part, a.slot_token, a.d_x_perm);
  if (geo_.shared_ffn_local > 0) be.add(d_part, d_part, a.partial);
  if (par.tp.rank() == 0) {  // every rank routed every row: one of them adds the router's share
    be.linear_backward_input(a.partial, a.d_logits, params_[router_].value);
    be.add(d_part, d_part, a.partial);
  }
  const Tensor d_ln2 = par.tp.reduce(d_part, s.d_norm);  // (R, D)
  be.rmsnorm_backward(s.d_branch, params_[ln2_].grad, d_ln2, x, params_[ln2_].value, a.ln2_rstd);
}

void MoeMlp::backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                             const BlockScratch& s) const {
  USTRAIN_ASSERT(m.routed != nullptr, "an MoE layer's weight pass needs the record of its forward's routing");
  const Views a = views(m);
  const Tensor ln2 = par.tp.gather(a.ln2_out, s.gathered);  // (N, D)
  Experts experts(*this, a);
  par.ep.backward_weight(be, experts, m.routed->counts);  // dispatched rows' owners computed theirs in backward
  be.linear_backward_weight(params_[router_].grad, a.d_logits, ln2);
  if (geo_.shared_ffn_local > 0) {
    be.linear_backward_weight(params_[shared_.down].grad, a.d_y, a.sh_act);
    be.linear_backward_weight(params_.packed_grad(shared_.gate, shared_.up), a.sh_d_gate_up, ln2);
  }
}

}  // namespace ustrain
