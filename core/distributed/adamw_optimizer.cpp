#include "core/distributed/adamw_optimizer.h"

#include <vector>

namespace ustrain {

void AdamW::update(const ParamStore& store, Communicator& group, const OptimizerStep& s) {
  (void)group;  // elementwise: nothing to exchange
  std::vector<AdamWTensors> ranges;
  for (const OptimizerSegment& seg : store.optimizer_segments())
    ranges.push_back({seg.value, seg.grad, seg.m, seg.v, seg.decay ? static_cast<float>(optim_.weight_decay) : 0.0f,
                      seg.compute_copy});
  update_ranges(ranges, s);  // the segments' compute copies (mixed precision) are rewritten too
}

void AdamW::update_ranges(std::span<const AdamWTensors> ranges, const OptimizerStep& s) {
  backend_.adamw_multi(ranges, AdamWParams{s.lr, static_cast<float>(optim_.beta1), static_cast<float>(optim_.beta2),
                                           static_cast<float>(optim_.eps), static_cast<float>(optim_.weight_decay),
                                           s.step, s.grad_scale});
}

}  // namespace ustrain
