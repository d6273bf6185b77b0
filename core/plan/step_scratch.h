// The memory plan's op-scratch line (core/memory/memory_plan.h): the most device scratch any
// op of a rank's training step takes, from the step's ops recorded with their local shapes
// (core/plan/step_profile.h). Ops run one at a time on the compute stream, so the largest is
// what one arena must hold. On the CPU only 16-bit storage takes any (the fp32 stand-ins of
// kernels/cpu/cpu_mixed_backend.h); the fp32 ops keep their own.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "core/plan/step_profile.h"
#include "core/recipe/recipe.h"
#include "kernels/backend.h"
#include "kernels/record/recording_backend.h"

namespace ustrain {

struct StepScratch {
  std::size_t bytes = 0;
  std::string op;  // the op that takes the most ("" when none takes any)
};

// The most `bytes_of` gives over the ops of pipeline rank `pp_rank`'s step of the checked,
// resolved `recipe`, recorded as if on the recipe's device.
StepScratch step_op_scratch(const Recipe& recipe, int pp_rank,
                            const std::function<std::size_t(const RecordedOp&)>& bytes_of);

// Without a GPU (`--dry-run`, the planner): our kernels' scratch and cuDNN's staging
// (kernels/record/op_scratch.h); cuDNN's plan workspace only the device knows. On the CPU the
// 16-bit tensors' fp32 stand-ins (0 in fp32).
std::size_t deviceless_op_scratch(const Recipe& recipe, int pp_rank);
// The same from the rank's step already recorded (step_recording(recipe, pp_rank), on the
// recipe's device).
std::size_t deviceless_op_scratch(const Recipe& recipe, const RankProfile& step);
// The scratch one op takes, as deviceless_op_scratch counts it; empty where no op takes any.
std::function<std::size_t(const RecordedOp&)> deviceless_scratch_of(const Recipe& recipe);

// For a run on `backend`, which is asked for every op (on CUDA that plans cuDNN's attention
// for the step's shapes, its workspace included). 0 on the CPU in fp32, recording nothing.
StepScratch backend_op_scratch(const Recipe& recipe, int pp_rank, Backend& backend);

}  // namespace ustrain
