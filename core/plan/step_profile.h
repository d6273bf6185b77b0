// What one pipeline rank of a layout does in a training step, learnt by running the real step
// (core/train/training_step.h) on the recording backend (kernels/record/recording_backend.h)
// over counting groups (parallel/counting_world.h): the ops of every compute action of its
// pipeline program, with their local shapes, the bytes each group carries during that action,
// and what follows the schedule (the gradient sync and the optimizer).
//
// The pipeline executor synchronizes the backend at the end of each compute action while it
// traces; the recording backend's synchronize hook marks there where an action ends.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "core/recipe/recipe.h"
#include "kernels/record/recording_backend.h"
#include "parallel/communicator.h"
#include "parallel/pipeline_schedule.h"

namespace ustrain {

// The groups whose traffic the planner prices, by what they carry.
struct GroupVolumes {
  CommVolume tp;         // tensor/sequence parallelism inside the layers (blocking)
  CommVolume gradients;  // data parallelism and ZeRO over dp x cp (asynchronous)
  CommVolume pp;         // activations and gradients between pipeline stages
  CommVolume cp;         // context parallelism's ring attention
  CommVolume embedding;  // tied embedding gradients between the first and last stage
  CommVolume ep;         // expert parallelism's dispatch of routed rows (all-to-all)
  CommVolume expert_gradients;  // the experts' gradient sync and ZeRO over dp x cp / ep
  GroupVolumes& operator-=(const GroupVolumes& o);
};

struct ActionProfile {
  PipelineAction action;  // its kind, micro-batch and chunk
  std::vector<RecordedOp> ops;
  GroupVolumes comm;
};

struct RankProfile {
  int micro_batches = 0;              // of the recorded step (the last one differs: it syncs gradients)
  std::vector<ActionProfile> actions;  // this rank's compute actions, in program order
  std::vector<RecordedOp> tail_ops;    // after the schedule: gradient sync, clipping, optimizer
  GroupVolumes tail_comm;
};

// The step of pipeline rank `pp_rank` (tensor-, data- and context-parallel rank 0) of the
// checked, resolved `recipe`, recorded as if on `device`, with the recipe's micro-batch count.
RankProfile record_rank_step(const Recipe& recipe, int pp_rank, Device device);

// What decides a recorded step: layouts with equal keys record the same one.
using StepKey = std::tuple<std::vector<std::int64_t>, std::string, std::string>;

// The step a layout is recorded as: the recipe with its micro-batch count cut to the fewest
// its schedule accepts (at least two, so that the last micro-batch's gradient sync shows apart
// from the others'), and its key.
struct StepRecording {
  Recipe recipe;
  StepKey key;
};
StepRecording step_recording(const Recipe& recipe, int pp_rank);

}  // namespace ustrain
