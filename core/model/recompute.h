// Activation recomputation policy for transformer blocks.
//   none:      keep every activation backward needs.
//   selective: drop the cheap-to-recompute, memory-heavy ones (the two RMSNorm outputs and
//              the SwiGLU output, ActivationSpec::cheap in core/model/sublayer.h) and
//              recompute them in backward from what is kept.
//   full:      keep only each block's input; backward reruns the block's forward first.
#pragma once

#include <string>

namespace ustrain {

enum class Recompute { none, selective, full };

Recompute parse_recompute(const std::string& name);  // "none" | "selective" | "full"
const char* recompute_name(Recompute r);

}  // namespace ustrain
