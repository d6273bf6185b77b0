// What the trainer does with one rank's training state (core/step/training_step.h) each step:
// read this rank's share of the next global batch and take the optimizer step on it, and run
// the validation pass.
#pragma once

#include <cstdint>

#include "core/step/lr_schedule.h"
#include "core/monitor/phase_timer.h"
#include "core/train/training_data.h"
#include "core/step/training_step.h"
#include "parallel/comm/trace.h"

namespace ustrain {

// One optimizer step (train_step) on the next train.grad_accum_steps() micro-batches of
// `data`. `timer` gets each phase's time, reading the data included; `trace` (null: none) the
// step's spans.
StepResult take_step(TrainingRank& run, TrainingData& data, const LrScheduleConfig& schedule, std::int64_t step,
                     PhaseTimer& timer, Tracer* trace);

// The validation loss (core/tools/eval.h): this rank's share of train.eval_batches global batches,
// forward only through the pipeline, the sums of the losses and their tokens over the loss group.
double validation_pass(TrainingRank& run, TrainingData& data);

}  // namespace ustrain
