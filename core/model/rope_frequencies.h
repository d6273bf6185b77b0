// The inverse frequencies RoPE turns each pair of a head by: pair i of a head of head_dim
// elements turns by pos * inv_freq[i] (Backend::rope_tables makes the cos/sin tables).
//
// Without scaling, inv_freq[i] = theta^(-2i / head_dim). model.rope_scaling = "llama3"
// rescales them as Llama 3.1 and 3.2 do, to stretch a model to a longer context: with
// wavelen = 2 pi / freq and L = rope_original_max_seq_len,
//   wavelen < L / high_freq_factor: kept (the high frequencies);
//   wavelen > L / low_freq_factor: divided by factor (the low frequencies);
//   in between: (1 - s) * freq / factor + s * freq, s = (L / wavelen - low) / (high - low).
#pragma once

#include <cstdint>
#include <vector>

#include "core/recipe/recipe.h"

namespace ustrain {

// head_dim / 2 inverse frequencies in float64, computed once on the host.
std::vector<double> rope_inverse_frequencies(const ModelSection& model, std::int64_t head_dim);

}  // namespace ustrain
