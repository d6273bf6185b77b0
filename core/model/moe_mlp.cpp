#include "core/model/moe_mlp.h"

#include <optional>

#include "core/model/expert_order.h"
#include "core/model/sequence_balance.h"
#include "kernels/scoped_seconds.h"

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

// This rank's experts on the rows the dispatcher hands it, in runs of at most C rows, with
// scratch for their activations (ep > 1).
class MoeMlp::Dispatched final : public ExpertCompute {
 public:
  Dispatched(const MoeMlp& mlp, const Views& a) : mlp_(mlp), a_(a) {}

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

 private:
  const ExpertParams& local(int expert) const {
    const std::int64_t i = expert - mlp_.geo_.experts_first;
    USTRAIN_ASSERT(i >= 0 && i < static_cast<std::int64_t>(mlp_.experts_.size()),
                   "expert " + std::to_string(expert) + " dispatched to a rank that does not hold it");
    return mlp_.experts_[static_cast<std::size_t>(i)];
  }
  const MoeMlp& mlp_;
  const Views& a_;
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
  reset_load();
}

void MoeMlp::declare_norm(ParamRegistry& params) {
  ln2_ = params.declare(
      {layer_prefix(layer_) + "post_attention_layernorm.weight", Shape{geo_.d_model}, false, false, 0.0, unit_});
}

std::vector<ActivationSpec> MoeMlp::activations(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch), r = geo_.rows(n), d = geo_.d_model, e = geo_.n_experts;
  const std::int64_t k = geo_.top_k, f = geo_.expert_ffn_local, fs = geo_.shared_ffn_local;
  const DType f32 = DType::f32, i32 = DType::i32;
  std::vector<ActivationSpec> specs{{"ln2_rstd", Shape{r}, f32},
                                    {"ln2_out", Shape{r, d}, c, /*cheap=*/true},
                                    {"router.logits", Shape{n, e}, c},
                                    {"router.probs", Shape{n, e}, f32},
                                    {"router.lse", Shape{n}, f32},
                                    {"router.experts", Shape{n, k}, i32},
                                    {"router.gates", Shape{n, k}, f32},
                                    {"experts.slot_token", Shape{n * k}, i32},
                                    {"experts.token_slot", Shape{n * k}, i32},
                                    {"experts.input", Shape{n * k, d}, c, /*cheap=*/true},
                                    {"experts.gate_up", Shape{n * k, 2 * f}, c},
                                    {"experts.swiglu_out", Shape{n * k, f}, c, /*cheap=*/true},
                                    {"experts.output", Shape{n * k, d}, c}};
  if (fs > 0) {
    specs.push_back({"shared.gate_up", Shape{n, 2 * fs}, c});
    specs.push_back({"shared.swiglu_out", Shape{n, fs}, c, /*cheap=*/true});
  }
  return specs;
}

std::vector<ActivationSpec> MoeMlp::deferred(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch), k = geo_.top_k, d = geo_.d_model;
  std::vector<ActivationSpec> specs{{"grad.experts_out", Shape{n * k, d}, c},
                                    {"grad.experts_gate_up", Shape{n * k, 2 * geo_.expert_ffn_local}, c},
                                    {"grad.router_logits", Shape{n, geo_.n_experts}, c}};
  if (geo_.shared_ffn_local > 0) {
    specs.push_back({"grad.mlp_out", Shape{n, d}, c});
    specs.push_back({"grad.shared_gate_up", Shape{n, 2 * geo_.shared_ffn_local}, c});
  }
  return specs;
}

std::vector<ActivationSpec> MoeMlp::workspace(std::int64_t max_batch, DType c) const {
  const std::int64_t n = geo_.tokens(max_batch), k = geo_.top_k, d = geo_.d_model, f = geo_.expert_ffn_local;
  const std::int64_t fs = geo_.shared_ffn_local;
  std::vector<ActivationSpec> specs{
      {"moe.experts_out", Shape{n * k, d}, c},      {"moe.grad.experts_rows", Shape{n * k, d}, c},
      {"moe.grad.swiglu_out", Shape{n * k, f}, c},  {"moe.grad.gate_up", Shape{n * k, 2 * f}, c},
      {"moe.grad.experts_input", Shape{n * k, d}, c}, {"moe.grad.gates", Shape{n, k}, DType::f32},
      {"moe.grad.router_logits", Shape{n, geo_.n_experts}, c}, {"moe.partial", Shape{n, d}, c}};
  if (fs > 0) {
    specs.push_back({"moe.grad.shared_swiglu_out", Shape{n, fs}, c});
    specs.push_back({"moe.grad.shared_gate_up", Shape{n, 2 * fs}, c});
  }
  if (bias_on_) specs.push_back({"moe.router_bias", Shape{geo_.n_experts}, DType::f32});
  if (seq_aux_ > 0) specs.push_back({"moe.grad.sequence_scores", Shape{max_batch, geo_.n_experts}, DType::f32});
  if (geo_.ep > 1) {  // the dispatch's buffers and a run's expert activations
    const std::int64_t cap = geo_.dispatch_capacity(max_batch);
    specs.push_back({"moe.dispatch.send", Shape{n * k, d}, c});
    specs.push_back({"moe.dispatch.recv", Shape{cap, d}, c});
    specs.push_back({"moe.dispatch.recv_grad", Shape{cap, d}, c});
    specs.push_back({"moe.dispatch.result", Shape{cap, d}, c});
    if (geo_.tp > 1)  // each tp rank's share of a round's rows, gathered and reduce-scattered over tp
      specs.push_back({"moe.dispatch.gathered", Shape{ExpertDispatcher::gathered_rows(cap, geo_.ep, geo_.tp), d}, c});
    specs.push_back({"moe.dispatch.gate_up", Shape{cap, 2 * f}, c});
    specs.push_back({"moe.dispatch.swiglu_out", Shape{cap, f}, c});
    specs.push_back({"moe.dispatch.grad.swiglu_out", Shape{cap, f}, c});
    specs.push_back({"moe.dispatch.grad.gate_up", Shape{cap, 2 * f}, c});
  }
  return specs;
}

MoeMlp::Views MoeMlp::views(const SubLayerMemory& m) const {
  const std::int64_t n = m.batch * m.seq, r = geo_.rows(n), nk = n * geo_.top_k;
  const auto& act = m.activations;
  const auto& w = m.workspace;
  const auto matrix = [](const Tensor& t, std::int64_t rows) {  // (rows, C) of a planned (rows_max, C)
    return Tensor(t.data, Shape{rows, t.shape.last()}, t.dtype, t.device);
  };
  Views v;
  v.ln2_rstd = first_rows(act.at(0), r);
  v.ln2_out = first_rows(act.at(1), r);
  v.logits = matrix(act.at(2), n);
  v.probs = matrix(act.at(3), n);
  v.lse = first_rows(act.at(4), n);
  v.experts = matrix(act.at(5), n);
  v.gates = matrix(act.at(6), n);
  v.slot_token = first_rows(act.at(7), nk);
  v.token_slot = first_rows(act.at(8), nk);
  v.x_perm = matrix(act.at(9), nk);
  v.gate_up = matrix(act.at(10), nk);
  v.act = matrix(act.at(11), nk);
  v.rows_out = matrix(act.at(12), nk);
  if (geo_.shared_ffn_local > 0) {
    v.sh_gate_up = matrix(act.at(13), n);
    v.sh_act = matrix(act.at(14), n);
    v.sh_d_act = matrix(w.at(8), n);
  }
  v.expert_out = matrix(w.at(0), nk);
  v.d_rows = matrix(w.at(1), nk);
  v.d_act = matrix(w.at(2), nk);
  v.d_x_perm = matrix(w.at(4), nk);
  v.d_gates = matrix(w.at(5), n);
  v.partial = matrix(w.at(7), n);
  std::size_t extra = geo_.shared_ffn_local > 0 ? 10 : 8;  // the optional workspace, in workspace()'s order
  if (bias_on_) v.router_bias = w.at(extra++);
  if (seq_aux_ > 0) v.seq_grad = matrix(w.at(extra++), m.batch);
  if (geo_.ep > 1) {
    v.dispatch.send = matrix(w.at(extra++), nk);
    v.dispatch.recv = w.at(extra++);
    v.dispatch.recv_grad = w.at(extra++);
    v.dispatch.result = w.at(extra++);
    if (geo_.tp > 1) v.dispatch.gathered = w.at(extra++);
    v.ep_gate_up = w.at(extra++);
    v.ep_act = w.at(extra++);
    v.ep_d_act = w.at(extra++);
    v.ep_d_gate_up = w.at(extra++);
  }
  v.deferred = !m.deferred.empty();
  if (v.deferred) {
    v.expert_out = matrix(m.deferred.at(0), nk);  // its gradient stays for the weight pass
    v.d_gate_up = matrix(m.deferred.at(1), nk);
    v.d_logits = matrix(m.deferred.at(2), n);
    if (geo_.shared_ffn_local > 0) {
      v.d_y = matrix(m.deferred.at(3), n);
      v.sh_d_gate_up = matrix(m.deferred.at(4), n);
    }
  } else {
    v.d_gate_up = matrix(w.at(3), nk);
    v.d_logits = matrix(w.at(6), n);
    if (geo_.shared_ffn_local > 0) v.sh_d_gate_up = matrix(w.at(9), n);
  }
  return v;
}

namespace {

// The chosen experts (N, k) on the host.
std::vector<std::int32_t> host_experts(Backend& be, const Tensor& experts) {
  std::vector<std::int32_t> host(static_cast<std::size_t>(experts.numel()));
  be.copy(Tensor(host.data(), experts.shape, DType::i32), experts);
  return host;
}

// The routing's expert order, from the chosen experts on the device.
ExpertOrder order_of(Backend& be, const Tensor& experts, std::int64_t n_experts) {
  return expert_order(host_experts(be, experts), n_experts, experts.shape.last());
}

}  // namespace

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

void MoeMlp::experts_forward(Backend& be, const Views& a, const std::vector<std::int64_t>& offsets, Tensor out) const {
  be.grouped_linear_forward(a.gate_up, a.x_perm, experts_gate_up(false), offsets);  // (N k, 2F)
  be.swiglu_forward(a.act, a.gate_up);                                             // (N k, F)
  be.grouped_linear_forward(out, a.act, experts_down(false), offsets);  // (N k, D), partial over tp
}

void MoeMlp::experts_backward_input(Backend& be, const Views& a, const std::vector<std::int64_t>& offsets,
                                    Tensor d_out) const {
  be.grouped_linear_backward_input(a.d_act, d_out, experts_down(false), offsets);  // (N k, F)
  be.swiglu_backward(a.d_gate_up, a.d_act, a.gate_up);                            // (N k, 2F)
  be.grouped_linear_backward_input(a.d_x_perm, a.d_gate_up, experts_gate_up(false), offsets);  // (N k, D)
}

void MoeMlp::experts_weight_grads(Backend& be, const Views& a, const std::vector<std::int64_t>& offsets, Tensor d_out,
                                  Tensor d_gate_up) const {
  be.grouped_linear_backward_weight(experts_down(true), d_out, a.act, offsets);
  be.grouped_linear_backward_weight(experts_gate_up(true), d_gate_up, a.x_perm, offsets);
}

Tensor MoeMlp::forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                       const BlockScratch& s) const {
  const Views a = views(m);
  be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, x, params_[ln2_].value, eps_);  // (R, D)
  const Tensor ln2 = par.tp.gather(a.ln2_out, s.gathered);                 // (N, D)
  std::optional<ScopedSeconds> routing(load_.routing_seconds);
  be.linear_forward(a.logits, ln2, params_[router_].value);  // (N, E)
  if (bias_on_) be.copy(a.router_bias, Tensor(const_cast<float*>(bias_.values.data()), a.router_bias.shape));
  be.moe_route(a.experts, a.gates, a.probs, a.lse, a.logits, routing_, a.router_bias);
  const ExpertOrder order = order_of(be, a.experts, geo_.n_experts);
  be.copy(a.slot_token, Tensor(const_cast<std::int32_t*>(order.slot_token.data()), a.slot_token.shape, DType::i32));
  be.copy(a.token_slot, Tensor(const_cast<std::int32_t*>(order.token_slot.data()), a.token_slot.shape, DType::i32));
  be.embedding_forward(a.x_perm, a.slot_token, ln2);  // (N k, D) in expert order
  routing.reset();
  // The shared experts need none of the routed rows: under ep they run while those travel.
  const auto shared_forward = [&] {
    if (geo_.shared_ffn_local == 0) return;
    be.linear_forward(a.sh_gate_up, ln2, params_.packed_value(shared_.gate, shared_.up));  // (N, 2 Fs)
    be.swiglu_forward(a.sh_act, a.sh_gate_up);
    be.linear_forward(a.partial, a.sh_act, params_[shared_.down].value);  // (N, D), partial over tp
  };
  if (geo_.ep > 1) {  // to the experts' ranks and back
    USTRAIN_ASSERT(par.ep.members() == geo_.ep, "an MoE layer planned for ep > 1 run without its ep group");
    Dispatched experts(*this, a);
    record(par.ep.forward(be, experts, order.counts, a.x_perm, a.expert_out, a.dispatch, shared_forward));
  } else {
    shared_forward();
    experts_forward(be, a, order.offsets, a.expert_out);
  }
  routing.emplace(load_.routing_seconds);
  be.embedding_forward(a.rows_out, a.token_slot, a.expert_out);  // (N k, D) in token order
  be.moe_combine(s.branch, a.rows_out, a.gates);                 // (N, D), partial over tp
  routing.reset();
  if (geo_.shared_ffn_local > 0) be.add(s.branch, s.branch, a.partial);
  return par.tp.reduce(s.branch, out);  // (R, D)
}

Tensor MoeMlp::balance_sequences(Backend& be, const LayerParallel& par, const Views& a, std::int64_t batch,
                                const std::vector<std::int32_t>& chosen, float loss_grad) const {
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
  load_.seq_aux_sum += balance.value;
  be.copy(a.seq_grad, Tensor(const_cast<float*>(balance.score_grad.data()), a.seq_grad.shape));
  return a.seq_grad;
}

void MoeMlp::backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m, const BlockScratch& s,
                      Recompute policy) const {
  const Views a = views(m);
  const bool shared = geo_.shared_ffn_local > 0;
  if (policy == Recompute::selective) be.rmsnorm_forward(a.ln2_out, a.ln2_rstd, x, params_[ln2_].value, eps_);
  const Tensor ln2 = par.tp.gather(a.ln2_out, s.gathered);  // (N, D)
  std::optional<ScopedSeconds> routing(load_.routing_seconds);
  if (policy == Recompute::selective) be.embedding_forward(a.x_perm, a.slot_token, ln2);
  const std::vector<std::int32_t> chosen = host_experts(be, a.experts);
  const ExpertOrder order = expert_order(chosen, geo_.n_experts, geo_.top_k);
  routing.reset();
  if (policy == Recompute::selective) {
    if (geo_.ep == 1) be.swiglu_forward(a.act, a.gate_up);
    if (shared) be.swiglu_forward(a.sh_act, a.sh_gate_up);
  }
  {  // the layer's load, and the z-loss of the tokens
    std::vector<float> lse(static_cast<std::size_t>(a.lse.numel()));
    be.copy(Tensor(lse.data(), a.lse.shape), a.lse);
    for (std::size_t e = 0; e < order.counts.size(); ++e) load_.tokens[e] += order.counts[e];
    load_.rows += a.lse.numel();
    for (float l : lse) load_.z_sum += static_cast<double>(l) * l;
  }

  // Everything that reads the gradient of the MLP's output first: under sp it shares its
  // buffer with the input gradient's partial sums.
  const Tensor d_y = par.tp.gather(s.d_resid, s.d_full);  // (N, D)
  routing.emplace(load_.routing_seconds);
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
  routing.emplace(load_.routing_seconds);
  be.fill(a.expert_out, 0.0f);
  be.embedding_backward(a.expert_out, a.token_slot, a.d_rows);  // each slot receives its one row
  routing.reset();
  if (geo_.ep > 1) {  // the rows and their gradients to the experts' ranks, input gradients back
    Dispatched experts(*this, a);
    record(par.ep.backward(be, experts, order.counts, a.x_perm, a.expert_out, a.d_x_perm, a.dispatch,
                           shared_backward));
  } else {
    shared_backward();
    experts_backward_input(be, a, order.offsets, a.expert_out);
    if (!a.deferred) experts_weight_grads(be, a, order.offsets, a.expert_out, a.d_gate_up);
  }
  const Tensor seq_grad = seq_aux_ > 0 ? balance_sequences(be, par, a, m.batch, chosen, s.loss_grad) : Tensor();
  routing.emplace(load_.routing_seconds);  // the router's backward, and the rows back in token order
  be.moe_route_backward(a.d_logits, a.d_gates, a.logits, a.probs, a.lse, a.experts, a.gates, routing_,
                        z_loss_ * s.loss_grad, seq_grad);
  if (!a.deferred) be.linear_backward_weight(params_[router_].grad, a.d_logits, ln2);

  // dL/d(ln2): the experts' inputs back in token order, the shared experts', the router's.
  const Tensor d_part = par.tp.partial_buffer(s.d_norm, s.d_full);  // (N, D)
  be.fill(d_part, 0.0f);
  be.embedding_backward(d_part, a.slot_token, a.d_x_perm);
  if (shared) be.add(d_part, d_part, a.partial);
  if (par.tp.rank() == 0) {  // every rank routed every row: one of them adds the router's share
    be.linear_backward_input(a.partial, a.d_logits, params_[router_].value);
    be.add(d_part, d_part, a.partial);
  }
  routing.reset();
  const Tensor d_ln2 = par.tp.reduce(d_part, s.d_norm);  // (R, D)
  be.rmsnorm_backward(s.d_branch, params_[ln2_].grad, d_ln2, x, params_[ln2_].value, a.ln2_rstd);
}

void MoeMlp::record(const DispatchStats& stats) const {
  load_.extra_rounds += stats.extra_rounds;
  load_.ep_wait_seconds += stats.wait_seconds;
}

void MoeMlp::backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                             const BlockScratch& s) const {
  const Views a = views(m);
  const Tensor ln2 = par.tp.gather(a.ln2_out, s.gathered);  // (N, D)
  if (geo_.ep == 1) {  // under ep the dispatched backward computed them
    const ExpertOrder order = order_of(be, a.experts, geo_.n_experts);
    experts_weight_grads(be, a, order.offsets, a.expert_out, a.d_gate_up);
  }
  be.linear_backward_weight(params_[router_].grad, a.d_logits, ln2);
  if (geo_.shared_ffn_local > 0) {
    be.linear_backward_weight(params_[shared_.down].grad, a.d_y, a.sh_act);
    be.linear_backward_weight(params_.packed_grad(shared_.gate, shared_.up), a.sh_d_gate_up, ln2);
  }
}

}  // namespace ustrain
