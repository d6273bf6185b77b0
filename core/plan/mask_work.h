// The attention work a training step needs under its mask (model.sliding_window,
// train.document_mask) against plain causal attention over the whole sequence, counted by the
// recording backend (kernels/record/recording_backend.h) from what the kernels compute: what
// `ustrain plan` and `ustrain bench` say the mask saves. MFU keeps counting the causal work.
#pragma once

#include <cstdint>

#include "core/recipe/recipe.h"

namespace ustrain {

struct MaskWork {
  double masked_flops = 0, causal_flops = 0;  // attention FLOPs of one step of pipeline rank 0
  double fraction() const { return causal_flops > 0 ? masked_flops / causal_flops : 1.0; }
};

// From one recorded step of the checked, resolved `recipe`, with documents of
// `document_tokens` tokens under train.document_mask (core/plan/document_length.h).
MaskWork mask_work(const Recipe& recipe, std::int64_t document_tokens);

}  // namespace ustrain
