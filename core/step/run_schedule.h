// The learning-rate schedule a run follows, and what the run says about it: a warm-up longer
// than the run is cut to the run's length (a `--set train.steps=1` smoke test of a long recipe),
// and a run resumed with another train.steps has its schedule stretched or squeezed to the new
// end, which moves the learning rate at the step it resumes from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/step/lr_schedule.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// The recipe's schedule over train.steps; the warm-up at most train.steps long.
LrScheduleConfig schedule_of(const Recipe& recipe);

// The warning for a warm-up cut short, with both numbers; nullopt when it fits.
std::optional<std::string> shortened_warmup_note(const Recipe& recipe);

// When the checkpoint's run (its resolved recipe as TOML) planned another train.steps than
// `current`: how the schedule changes for the rest of the run, with the learning rate at
// `step` (the checkpoint's) before and at step + 1 after. nullopt when train.steps is the same,
// no step is left, or the saved recipe cannot be read.
std::optional<std::string> stretched_schedule_note(const std::string& saved_toml, const Recipe& current,
                                                   std::int64_t step);

}  // namespace ustrain
