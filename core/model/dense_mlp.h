// The dense SwiGLU MLP of a Llama block: pre-norm, fused gate/up projection, SwiGLU and the
// down projection,
//
//   mlp(x) = down_proj(swiglu(gate_up_proj(rmsnorm(x))))
//
// Under tensor parallelism gate/up are column-parallel over this rank's hidden units and
// down_proj row-parallel. F is this rank's hidden width (core/recipe/geometry.h), other sizes
// as in core/model/sublayer.h.
#pragma once

#include "core/recipe/geometry.h"
#include "core/model/mlp.h"
#include "core/recipe/recipe.h"

namespace ustrain {

class DenseMlp final : public Mlp {
 public:
  // Declares gate/up/down (global shapes) in `unit` of `params`.
  DenseMlp(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geometry, ParamRegistry& params);
  void declare_norm(ParamRegistry& params) override;
  const char* kind() const override { return "dense"; }

  std::vector<ActivationSpec> activations(std::int64_t max_batch, DType compute) const override;
  std::vector<ActivationSpec> deferred(std::int64_t max_batch, DType compute) const override;
  std::vector<ActivationSpec> workspace(std::int64_t max_batch, DType compute) const override;

  Tensor forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                 const BlockScratch& s) const override;
  void backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m, const BlockScratch& s,
                Recompute policy) const override;
  void backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                       const BlockScratch& s) const override;

 private:
  struct Views;
  Views views(const SubLayerMemory& m) const;

  const ModelGeometry& geo_;
  int layer_;
  UnitId unit_;
  float eps_;
  int ln2_ = -1, gate_, up_, down_;
  const ParamRegistry& params_;
};

}  // namespace ustrain
