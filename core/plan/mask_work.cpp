#include "core/plan/mask_work.h"

#include "core/plan/step_profile.h"

namespace ustrain {
namespace {

double attention_flops(const Recipe& recipe, std::int64_t document_tokens) {
  const RankProfile step = record_rank_step(step_recording(recipe, 0).recipe, 0, Device::cpu, nullptr, document_tokens);
  double flops = 0;
  const auto add = [&](const std::vector<RecordedOp>& ops) {
    for (const RecordedOp& op : ops)
      if (op.op_class == OpClass::attention) flops += static_cast<double>(op.flops);
  };
  for (const ActionProfile& a : step.actions) add(a.ops);
  add(step.tail_ops);
  return flops;
}

}  // namespace

MaskWork mask_work(const Recipe& recipe, std::int64_t document_tokens) {
  Recipe causal = recipe;
  causal.model.sliding_window = 0;
  causal.train.document_mask = false;
  MaskWork w;
  w.causal_flops = attention_flops(causal, 0);
  w.masked_flops = recipe.model.sliding_window > 0 || recipe.train.document_mask
                       ? attention_flops(recipe, document_tokens)
                       : w.causal_flops;
  return w;
}

}  // namespace ustrain
