// AdamW with decoupled weight decay, elementwise over every range this rank updates: the
// parameters the store lays out as weight-decayed get optim.weight_decay, the others none.
#pragma once

#include <span>

#include "core/distributed/optimizer.h"
#include "core/recipe/recipe.h"
#include "kernels/backend.h"

namespace ustrain {

class AdamW : public Optimizer {
 public:
  AdamW(const OptimSection& o, Backend& backend) : optim_(o), backend_(backend) {}
  const char* name() const override { return "adamw"; }
  void update(const ParamStore& store, Communicator& group, const OptimizerStep& s) override;
  // AdamW over `ranges` with this step's numbers (their weight decay is theirs).
  void update_ranges(std::span<const AdamWTensors> ranges, const OptimizerStep& s);

 private:
  OptimSection optim_;
  Backend& backend_;
};

}  // namespace ustrain
