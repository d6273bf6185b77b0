// The MLP sub-layer of a block, whatever its kind: the dense SwiGLU MLP (core/model/
// dense_mlp.h) or a mixture of experts (core/model/moe_mlp.h). Each kind declares its parameters,
// lists the tensors it needs planned (core/model/sublayer.h) and runs its passes on them:
//
//   x_out = x_mid + mlp(x_mid)
//
// with the residual add left to the block. Sizes as in core/model/sublayer.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/layer_parallel.h"
#include "core/model/param_registry.h"
#include "core/model/sublayer.h"

namespace ustrain {

// What a mixture-of-experts layer's router did in the backward passes since its last reset, on
// this rank (every choice is computed: nothing is dropped).
struct MoeLoad {
  int layer = 0;
  std::vector<std::int64_t> tokens;  // per expert: the token choices routed to it
  std::int64_t rows = 0;             // tokens routed
  double z_sum = 0;                  // the sum over those tokens of the squared router log-sum-exp
  // Expert parallelism's dispatch rounds past the first (its capacity exceeded), forward and
  // backward: the same on every rank of an ep group.
  std::int64_t extra_rounds = 0;
  // Seconds this rank's host waited on those dispatches' row exchanges: what compute did not hide.
  double ep_wait_seconds = 0;
  // Seconds the host spent routing and permuting (the router's GEMMs and softmax/top-k, the
  // expert order, the gathers into and out of it, the combine; forward and backward): on the
  // CPU their time, on a GPU only the time to issue them.
  double routing_seconds = 0;
  // The sequence-level balance loss alpha sum_i f_i P_i of those tokens' sequences, each
  // sequence's share of its P_i from this rank's tokens (the shares add up over cp).
  double seq_aux_sum = 0;
};

// What a mixture-of-experts layer routed in one micro-batch, on the host: its caller keeps one
// per layer and micro-batch slot (SubLayerMemory::routed). The forward writes it (one copy of
// the chosen experts from the device), the backward and the weight pass read it instead of
// copying again, and the backward adds its statistics to `load`, which the model owns.
struct RoutedTokens {
  std::vector<std::int64_t> counts;  // (E) rows of each expert, in expert order
  std::vector<std::int32_t> chosen;  // (N, k) each token's experts
  MoeLoad* load = nullptr;           // null: nothing recorded (decoding)
};

// Auxiliary-loss-free balancing's per-expert bias of a mixture-of-experts router (DeepSeek-V3):
// added to the scores only to choose the experts. Model state that training moves by the
// expert load (core/step/router_balance.h), not a trained parameter.
struct RouterBias {
  int layer = 0;
  std::string name;           // its global name in checkpoints
  std::vector<float> values;  // (E)
};

class Mlp {
 public:
  virtual ~Mlp() = default;
  // "dense", "moe": layers of one kind share their workspace.
  virtual const char* kind() const = 0;

  // A kind declares its matrices when made; its norm gain here, once every sub-layer of the
  // block has declared its matrices (the order checkpoints list them in).
  virtual void declare_norm(ParamRegistry& params) = 0;

  // For micro-batches of at most `max_batch` sequences (core/model/sublayer.h).
  virtual std::vector<ActivationSpec> activations(std::int64_t max_batch, DType compute) const = 0;
  virtual std::vector<ActivationSpec> deferred(std::int64_t max_batch, DType compute) const = 0;
  virtual std::vector<ActivationSpec> workspace(std::int64_t max_batch, DType compute) const = 0;

  // mlp(x) for x (R, D), as this rank's rows (R, D): in `out`, or in s.branch.
  virtual Tensor forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                         const BlockScratch& s) const = 0;
  // From s.d_resid = dL/d(mlp(x)), writes dL/dx through the MLP to s.d_branch; selective
  // recompute rebuilds the cheap activations first. Parameter gradients accumulate, or with
  // m.deferred wait for backward_weight().
  virtual void backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m,
                        const BlockScratch& s, Recompute policy) const = 0;
  virtual void backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                               const BlockScratch& s) const = 0;

  // Units of parameters of its own besides the block's (a mixture of experts' routed experts),
  // which the model acquires and releases with the block's.
  virtual std::vector<UnitId> own_units() const { return {}; }
  // A mixture of experts' routing statistics, empty (none for other kinds): where the model
  // gathers what the layer's backward passes record (RoutedTokens::load).
  virtual std::optional<MoeLoad> empty_load() const { return std::nullopt; }
  // A mixture of experts' routing bias when auxiliary-loss-free balancing is on, else null.
  virtual RouterBias* router_bias() { return nullptr; }
  virtual const RouterBias* router_bias() const { return nullptr; }
};

}  // namespace ustrain
