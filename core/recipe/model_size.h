// What a model of the recipe's shape costs, from the recipe alone, before anything is built or
// planned: its parameters as the model's geometry counts them (core/recipe/geometry.h), in long
// double, so that an absurd recipe (model.n_layers = 10^15) is reported with its numbers
// instead of overflowing the 64-bit byte counts of the memory plan.
#pragma once

#include <optional>
#include <string>

#include "core/recipe/recipe.h"

namespace ustrain {

struct ModelSize {
  long double parameters = 0;  // the whole model (model.vocab_size rows of embedding, once or twice)
  // At least what one rank holds of the training state: fp32 weights, gradients and both Adam
  // moments (16 bytes per parameter; in bf16, fp16 and fp8 also a 2-byte compute copy) of the
  // pipeline rank that holds least, split over tp and, by ZeRO stage, over dp * cp (in mixed
  // precision the fp32 weights from stage 1 on).
  long double state_bytes_per_rank = 0;
  // Roughly what one micro-batch's activations and logits take (fp32), all tensor-parallel
  // ranks together.
  long double activation_bytes = 0;
};

// An unset model.vocab_size or parallel.dp (0) counts as 1.
ModelSize model_size(const Recipe& r);

// Why the recipe's model cannot be planned at all (its byte counts pass 2^60, beyond any
// machine), with the numbers; nullopt when fine.
std::optional<std::string> model_size_problem(const Recipe& r);

// 16 bytes per parameter, as text: "7.24e+09 parameters x 16 bytes = 107.88 GiB".
std::string describe_state_bytes(const ModelSize& size);

// Bytes in binary units, as kernels/tensor.h's format_bytes writes them, up to YiB (for sizes
// beyond 64 bits).
std::string describe_bytes(long double bytes);

}  // namespace ustrain
