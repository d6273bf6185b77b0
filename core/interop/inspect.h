// `ustrain ckpt inspect`: what a checkpoint or a Hugging Face safetensors model holds.
#pragma once

#include <string>

namespace ustrain {

// For a ustrain checkpoint (or run directory): format, step, tokens seen, files, tensors
// with shapes and stored states, and the recipe. For a Hugging Face model (a .safetensors
// file, an index or a directory with them): its tensors, and when it has a config.json the
// [model] recipe section that describes it.
std::string inspect(const std::string& path);

}  // namespace ustrain
