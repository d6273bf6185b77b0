// The optimizer behind the training step: one interface, one class per optimizer (AdamW in
// core/distributed/adamw_optimizer.h, Muon in core/distributed/muon_optimizer.h). The step
// calls update() once per parameter store, after the gradients are reduced, on every rank of
// the store's sync group in the same order (an optimizer may communicate over the group).
#pragma once

#include <cstdint>

#include "core/model/param_store.h"
#include "parallel/comm/communicator.h"

namespace ustrain {

// What changes from step to step.
struct OptimizerStep {
  float lr = 3e-4f;
  std::int64_t step = 1;  // 1-based
  // Multiplies every gradient as it is read: the loss scale's inverse times the clipping factor.
  float grad_scale = 1.0f;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  // Updates the stored values this rank updates of `store` (ParamStore::optimizer_segments:
  // every unit, or this rank's chunks under ZeRO) from the reduced gradients, and the same
  // ranges of the compute copy in mixed precision (the engine gathers the rest). `group` is
  // the store's sync group.
  virtual void update(const ParamStore& store, Communicator& group, const OptimizerStep& s) = 0;
};

}  // namespace ustrain
