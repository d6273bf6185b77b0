// Model state a checkpoint keeps beside the parameters and their AdamW moments: whole fp32
// tensors that are not trained (a mixture of experts' routing biases, core/model/mlp.h; FP8
// scaling state, core/step/fp8_layers.h),
// stored as state "param" only, under their global names. Every rank that holds one holds all
// of it, alike (replicated over dp, cp and tp; a pipeline stage holds its layers'): one of
// them saves it, and each of them loads it, whatever layout wrote it.
#pragma once

#include <string>
#include <vector>

#include "core/model/param_registry.h"

namespace ustrain {

struct ModelStateTensor {
  std::string name;                // global name
  std::vector<float>* values = nullptr;  // the whole tensor, on the host
  // A checkpoint without it leaves it as it is (an FP8 scaling state's first values); else
  // it starts at zero (a routing bias).
  bool kept_when_absent = false;
};

struct ModelState {
  std::vector<ParamDecl> whole_model;  // every such tensor of the model: name and shape
  std::vector<ModelStateTensor> held;  // this rank's, in whole_model's order
  bool saves = false;                  // whether this rank saves what it holds
};

}  // namespace ustrain
