#include "core/model/transformer_block.h"

#include "core/model/dense_mlp.h"
#include "core/model/grouped_query_attention.h"
#include "core/model/moe_mlp.h"

namespace ustrain {

TransformerBlock::TransformerBlock(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geo,
                                   ParamRegistry& params)
    : unit_(unit), geo_(geo), attention_(std::make_unique<GroupedQueryAttention>(layer, unit, cfg, geo, params)) {
  std::unique_ptr<Mlp> mlp;
  if (geo.moe_layer(layer)) mlp = std::make_unique<MoeMlp>(layer, unit, cfg, geo, params);
  else mlp = std::make_unique<DenseMlp>(layer, unit, cfg, geo, params);
  attention_->declare_norm(params);
  mlp->declare_norm(params);
  mlp_ = std::move(mlp);
}

std::vector<UnitId> TransformerBlock::units() const {
  std::vector<UnitId> units{unit_};
  for (UnitId u : mlp_->own_units()) units.push_back(u);
  return units;
}

ActivationSpec TransformerBlock::x_mid(std::int64_t max_batch, DType compute) const {
  return {"x_mid", Shape{geo_.rows(geo_.tokens(max_batch)), geo_.d_model}, compute};
}

void TransformerBlock::forward(Backend& be, const LayerParallel& par, Tensor x_in, Tensor x_out, const BlockMemory& m,
                               const BlockScratch& s, const RopeTables& rope) const {
  be.add(m.x_mid, x_in, attention_->forward(be, par, x_in, m.x_mid, m.attention, s, rope));
  be.add(x_out, m.x_mid, mlp_->forward(be, par, m.x_mid, x_out, m.mlp, s));
}

void TransformerBlock::decode(Backend& be, const LayerParallel& par, Tensor x_in, Tensor x_out, const BlockDecode& m,
                              const BlockScratch& s) const {
  be.add(m.x_mid, x_in, attention_->decode(be, x_in, m.attention, s));
  be.add(x_out, m.x_mid, mlp_->forward(be, par, m.x_mid, x_out, m.mlp, s));
}

void TransformerBlock::backward(Backend& be, const LayerParallel& par, Tensor x_in, const BlockMemory& m,
                                const BlockScratch& s, const RopeTables& rope, Recompute policy) const {
  USTRAIN_ASSERT((m.attention.deferred.empty() && m.mlp.deferred.empty()) || policy == Recompute::none,
                 "deferred weight gradients need every activation kept");
  // Only x_in was kept: rebuild every activation (x_out goes to d_branch, free until the
  // first sub-layer's backward writes it).
  if (policy == Recompute::full) forward(be, par, x_in, s.d_branch, m, s, rope);
  mlp_->backward(be, par, m.x_mid, m.mlp, s, policy);  // d_resid is dL/dx_out = dL/d(mlp branch)
  be.add(s.d_resid, s.d_resid, s.d_branch);             // now dL/dx_mid
  attention_->backward(be, par, x_in, m.attention, s, rope, policy);
  be.add(s.d_resid, s.d_resid, s.d_branch);  // now dL/dx_in
}

void TransformerBlock::backward_weight(Backend& be, const LayerParallel& par, const BlockMemory& m,
                                       const BlockScratch& s) const {
  USTRAIN_ASSERT(!m.attention.deferred.empty() && !m.mlp.deferred.empty(), "a weight pass needs the deferred tensors");
  mlp_->backward_weight(be, par, m.mlp, s);
  attention_->backward_weight(be, par, m.attention, s);
}

}  // namespace ustrain
