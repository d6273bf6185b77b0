// Model weights as an HDF5 file: one float32 dataset per parameter, named by its Hugging
// Face name ("model.layers.0.self_attn.q_proj.weight"), plus the model shape as attributes.
// This is what `ustrain generate --run DIR` reads; full checkpoints (optimizer state, data
// position, resume) are a separate format.
#pragma once

#include <string>

#include "core/model/params.h"

namespace ustrain {

// Writes atomically: a temporary file is written, flushed and renamed over `path`.
void save_weights(const std::string& path, const ParamSet& params, Backend& backend);
// Loads every parameter; UserError naming the file when a tensor is missing, has another
// shape, or the file is unreadable.
void load_weights(const std::string& path, const ParamSet& params, Backend& backend);

}  // namespace ustrain
