// What a mixture-of-experts layer asks the model to plan, and its views of the planned tensors,
// found by their specs' names.
#include "core/model/moe_views.h"

namespace ustrain {

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
  const auto act = [&](std::string_view name) { return planned(activation_names_, m.activations, name); };
  const auto work = [&](std::string_view name) { return planned(workspace_names_, m.workspace, name); };
  const auto kept = [&](std::string_view name) { return planned(deferred_names_, m.deferred, name); };
  const auto matrix = [](const Tensor& t, std::int64_t rows) {  // (rows, C) of a planned (rows_max, C)
    return t.empty() ? t : Tensor(t.data, Shape{rows, t.shape.last()}, t.dtype, t.device);
  };
  Views v;
  v.ln2_rstd = first_rows(act("ln2_rstd"), r);
  v.ln2_out = first_rows(act("ln2_out"), r);
  v.logits = matrix(act("router.logits"), n);
  v.probs = matrix(act("router.probs"), n);
  v.lse = first_rows(act("router.lse"), n);
  v.experts = matrix(act("router.experts"), n);
  v.gates = matrix(act("router.gates"), n);
  v.slot_token = first_rows(act("experts.slot_token"), nk);
  v.token_slot = first_rows(act("experts.token_slot"), nk);
  v.x_perm = matrix(act("experts.input"), nk);
  v.gate_up = matrix(act("experts.gate_up"), nk);
  v.act = matrix(act("experts.swiglu_out"), nk);
  v.rows_out = matrix(act("experts.output"), nk);
  v.sh_gate_up = matrix(act("shared.gate_up"), n);
  v.sh_act = matrix(act("shared.swiglu_out"), n);
  v.sh_d_act = matrix(work("moe.grad.shared_swiglu_out"), n);
  v.d_rows = matrix(work("moe.grad.experts_rows"), nk);
  v.d_act = matrix(work("moe.grad.swiglu_out"), nk);
  v.d_x_perm = matrix(work("moe.grad.experts_input"), nk);
  v.d_gates = matrix(work("moe.grad.gates"), n);
  v.partial = matrix(work("moe.partial"), n);
  v.router_bias = work("moe.router_bias");
  v.seq_grad = matrix(work("moe.grad.sequence_scores"), m.batch);
  v.dispatch = {matrix(work("moe.dispatch.send"), nk), work("moe.dispatch.recv"), work("moe.dispatch.recv_grad"),
                work("moe.dispatch.result"), work("moe.dispatch.gathered")};
  v.ep_gate_up = work("moe.dispatch.gate_up");
  v.ep_act = work("moe.dispatch.swiglu_out");
  v.ep_d_act = work("moe.dispatch.grad.swiglu_out");
  v.ep_d_gate_up = work("moe.dispatch.grad.gate_up");
  // A split backward keeps the gradients its weight pass reads; otherwise they are workspace.
  v.deferred = !m.deferred.empty();
  v.expert_out = matrix(v.deferred ? kept("grad.experts_out") : work("moe.experts_out"), nk);
  v.d_gate_up = matrix(v.deferred ? kept("grad.experts_gate_up") : work("moe.grad.gate_up"), nk);
  v.d_logits = matrix(v.deferred ? kept("grad.router_logits") : work("moe.grad.router_logits"), n);
  v.sh_d_gate_up = matrix(v.deferred ? kept("grad.shared_gate_up") : work("moe.grad.shared_gate_up"), n);
  v.d_y = matrix(kept("grad.mlp_out"), n);
  return v;
}

}  // namespace ustrain
