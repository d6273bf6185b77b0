// Parameters of a model, with their gradients and AdamW moments, laid out by the memory plan.
//
// Layers declare parameters by their Hugging Face names. The set lays them out so that
// (1) every weight-decayed parameter is contiguous, then every non-decayed one (norm gains),
// so AdamW runs as two flat calls; (2) a parameter declared `packed` follows the previous one
// with no padding, so q/k/v (or gate/up) form one matrix for one fused GEMM; (3) gradients and
// both moments use the same order, so the whole gradient is one flat tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_plan.h"

namespace ustrain {

struct ParamSpec {
  std::string name;    // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;
  bool decay = true;   // weight decay applies (matrices) or not (norm gains)
  bool packed = false; // contiguous with the previous declaration (same group)
  double init_std = 0; // normal(0, init_std); 0 means "ones" (norm gains)
};

// Views of one parameter and its state, valid after bind().
struct ParamViews {
  Tensor value, grad, m, v;
};

class ParamSet {
 public:
  // Returns a handle used to look the parameter up after bind().
  int declare(ParamSpec spec);
  // Adds parameters, gradients and moments to the plan (decay group first).
  void plan(MemoryPlan& plan);
  void bind(const PlannedMemory& mem);

  const ParamViews& operator[](int handle) const { return views_.at(static_cast<std::size_t>(handle)); }
  // Rows of `first` through `last` (packed neighbours) as one (sum of rows, cols) matrix.
  Tensor packed_value(int first, int last) const;
  Tensor packed_grad(int first, int last) const;

  const std::vector<ParamSpec>& specs() const { return specs_; }
  std::int64_t count() const;  // number of scalar parameters

  // Flat views of a whole group for the optimizer: decay = true or false.
  struct Group { Tensor value, grad, m, v; };
  Group group(bool decay) const;
  // Every gradient as one flat tensor (padding between entries is zero).
  Tensor all_grads() const { return all_grads_; }

  // Deterministic initialisation from the seed: each element depends only on (seed, name,
  // index), never on the layout or thread count.
  void initialise(Backend& backend, std::uint64_t seed) const;

 private:
  struct Handles { int value = -1, grad = -1, m = -1, v = -1; };
  std::vector<ParamSpec> specs_;
  std::vector<Handles> handles_;
  std::vector<ParamViews> views_;
  std::vector<int> layout_order_;  // indices into specs_, in memory order
  Group decay_group_, no_decay_group_;
  Tensor all_grads_;
};

}  // namespace ustrain
