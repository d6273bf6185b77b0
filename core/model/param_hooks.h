// How the model announces its use of parameters, unit by unit (core/model/param_registry.h),
// so that a data-parallel engine can gather sharded values just in time and reduce gradients
// while backward still runs. The model calls these in the same order on every rank; it never
// learns what the engine does with them.
#pragma once

#include "core/model/param_registry.h"

namespace ustrain {

class ParamUseHooks {
 public:
  virtual ~ParamUseHooks() = default;
  // Before the model reads unit u's values (and, in backward, accumulates its gradients).
  virtual void acquire(UnitId u, bool backward) = 0;
  // When it is done with them for now.
  virtual void release(UnitId u) = 0;
  // In backward, once unit u's gradients for this backward are complete.
  virtual void grads_done(UnitId u) = 0;
};

}  // namespace ustrain
