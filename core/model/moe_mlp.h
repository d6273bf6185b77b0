// The mixture-of-experts MLP of a block: pre-norm, a router that sends every token to its top-k
// routed experts (SwiGLU MLPs of their own), the gate-weighted sum of their outputs, and
// optionally shared experts every token passes through,
//
//   mlp(x) = sum_j gate_j(h) expert_{e_j}(h) + shared(h),   h = rmsnorm(x)
//
// Routing is dropless: every choice of every token is computed (no capacity factor), so a
// token's result does not depend on the other tokens of its micro-batch or on the layout. The
// router's logits are (N, E) GEMM outputs; its scores, choices and gates are computed in fp32
// (Backend::moe_route). Tokens move into expert order (core/model/expert_order.h) by a row
// gather, each expert runs its GEMMs on its contiguous rows (experts with no token are
// skipped), and the outputs move back to token order for the combine. The router z-loss
// (model.router_z_loss: the squared log-sum-exp of each token's logits, averaged like the
// training loss) adds its gradient in backward.
//
// Balancing that is the same on every layout (a micro-batch's composition changes with dp,
// a sequence's does not):
//   sequence-level balance loss (model.router_seq_aux_loss = alpha; DeepSeek-V3): per sequence
//     of T tokens alpha sum_i f_i P_i, f_i = E / (k T) x the sequence's top-k choices of expert
//     i (a constant), P_i = the mean over its tokens of the normalised score s_i / sum_m s_m;
//     averaged over the global batch's sequences (its gradient scaled like the cross-entropy's).
//     Under cp each rank holds part of every sequence: the per-sequence choice counts are
//     summed over the cp ranks before f_i is formed.
//   auxiliary-loss-free balancing (model.router_bias_update_rate; DeepSeek-V3): a per-expert
//     bias (RouterBias) added to the scores only to choose the top-k; the gates use the
//     unbiased scores. Training moves it after every step (core/step/router_balance.h).
//
// Under tensor parallelism every expert (and the shared experts) splits its hidden units like
// the dense MLP, column-parallel gate/up and row-parallel down, so the combine sums partial
// outputs that the block's reduce adds up; the router is replicated and sees every token row
// on every rank. F is one routed expert's hidden width on this rank, Fs the shared experts'
// together, E the experts, k the experts per token; other sizes as in core/model/sublayer.h.
//
// The routed experts are parameters of their own unit (UnitId::experts) in the expert sync
// group. Under expert parallelism this rank holds the geometry's block of them (global names
// keep their global index) and the rows in expert order go through the layer context's
// ExpertDispatcher (parallel/expert_dispatch.h) to the ranks that own their experts and back;
// its rounds' expert activations are scratch of the dispatch capacity's rows, recomputed in
// backward from the rows sent again, and the experts' weight gradients are computed there
// (not deferred to a split backward's weight pass). Under ep with tp > 1 (sequence parallelism
// on) each tp rank gets back full results for its share of the rows sent away and zeros for
// the others' share (rows its own experts take stay partial): the combine's inputs are still
// partial sums over tp, so d_gates' tp sum, the input gradients' tp reduce and the router's
// share added on tp rank 0 hold unchanged. The layer always calls the dispatcher, as attention
// calls the ring: at ep = 1 it is the local case, which runs every expert at once in place on
// the planned activations as above (ExpertCompute::forward_all), keeping them for backward and
// deferring their weight gradients to a split backward's weight pass.
//
// The planned tensors are found by their specs' names. What the layer routed in a micro-batch
// (the expert counts and choices, copied from the device once, in forward) and its statistics
// live in values its caller owns (RoutedTokens, MoeLoad: core/model/mlp.h), not in the layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/recipe/geometry.h"
#include "core/model/mlp.h"
#include "core/recipe/recipe.h"

namespace ustrain {

class MoeMlp final : public Mlp {
 public:
  // Declares the router, the experts and the shared experts (global shapes) in `unit`.
  MoeMlp(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geometry, ParamRegistry& params);
  void declare_norm(ParamRegistry& params) override;
  const char* kind() const override { return "moe"; }

  std::vector<ActivationSpec> activations(std::int64_t max_batch, DType compute) const override;
  std::vector<ActivationSpec> deferred(std::int64_t max_batch, DType compute) const override;
  std::vector<ActivationSpec> workspace(std::int64_t max_batch, DType compute) const override;

  Tensor forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                 const BlockScratch& s) const override;
  void backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m, const BlockScratch& s,
                Recompute policy) const override;
  void backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                       const BlockScratch& s) const override;

  std::vector<UnitId> own_units() const override { return {UnitId::experts(layer_)}; }
  std::optional<MoeLoad> empty_load() const override {
    return MoeLoad{layer_, std::vector<std::int64_t>(static_cast<std::size_t>(geo_.n_experts), 0)};
  }
  RouterBias* router_bias() override { return bias_on_ ? &bias_ : nullptr; }
  const RouterBias* router_bias() const override { return bias_on_ ? &bias_ : nullptr; }

 private:
  struct Views;
  struct ExpertParams {
    int gate, up, down;
  };
  class Experts;
  // This rank's experts' packed gate/up weights (2F, D) and down weights (D, F), in expert
  // order: their values, or (grads) their fp32 gradients.
  std::vector<Tensor> experts_gate_up(bool grads) const;
  std::vector<Tensor> experts_down(bool grads) const;
  Views views(const SubLayerMemory& m) const;
  // The router's choices into `r` (the one copy of the micro-batch from the device) and the
  // tokens in expert order into a.x_perm.
  void route(Backend& be, const Views& a, Tensor ln2, RoutedTokens& r) const;
  // The sequence-level balance loss of a micro-batch of `batch` sequences routed to `chosen`
  // (N k, host): its gradient of the normalised scores into a.seq_grad (B, E), returned, and
  // its value added to `seq_aux_sum`.
  Tensor balance_sequences(Backend& be, const LayerParallel& par, const Views& a, std::int64_t batch,
                           const std::vector<std::int32_t>& chosen, float loss_grad, double& seq_aux_sum) const;
  // The router's backward and dL/d(ln2) into s.d_branch.
  void router_and_input_backward(Backend& be, const LayerParallel& par, Tensor x, const Views& a, Tensor ln2,
                                 const BlockScratch& s, Tensor seq_grad) const;

  const ModelGeometry& geo_;
  int layer_;
  UnitId unit_;
  float eps_;
  MoeRouting routing_;
  float z_loss_;
  float seq_aux_;  // alpha of the sequence-level balance loss; 0: off
  bool bias_on_;   // auxiliary-loss-free balancing
  RouterBias bias_;
  int ln2_ = -1, router_;
  std::vector<ExpertParams> experts_;  // this rank's: experts [geo_.experts_first, + experts_local)
  ExpertParams shared_{-1, -1, -1};
  const ParamRegistry& params_;
  // The names of the specs activations(), deferred() and workspace() list, in their order.
  std::vector<std::string> activation_names_, deferred_names_, workspace_names_;
};

}  // namespace ustrain
