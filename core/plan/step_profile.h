// What one pipeline rank of a layout does in a training step, learnt by running the real step
// (core/step/training_step.h) on the recording backend (kernels/record/recording_backend.h)
// over counting groups (parallel/counting_world.h): the ops of every compute action of its
// pipeline program, with their local shapes, the bytes each group carries during that action,
// and what follows the schedule (the gradient sync and the optimizer).
//
// The pipeline executor synchronizes the backend at the end of each compute action while it
// traces; the recording backend's synchronize hook marks there where an action ends.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/recipe/recipe.h"
#include "kernels/record/recording_backend.h"
#include "parallel/comm/communicator.h"
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
  // Hybrid sharding (parallel.dp_shard < dp) alone, where ZeRO's traffic leaves `gradients`:
  CommVolume dp_shard;      // ZeRO's gathers and reduce-scatters inside a block of dp_shard x cp
  CommVolume dp_replicate;  // the reduced gradient shards summed across the blocks
  GroupVolumes& operator-=(const GroupVolumes& o);
};

// What a planner keeps of a run of ops once they are priced: their seconds, the seconds of
// their attention ops alone, and the most scratch any of them takes.
struct OpsDigest {
  double seconds = 0, attention_seconds = 0;
  // Of the GEMMs and attention alone: the model's own math, the same at every data-parallel
  // size and ZeRO stage (the engines add copies, sums and optimizer ops, never these).
  double model_seconds = 0;
  double optimizer_seconds = 0;  // of the optimizer's ops alone (AdamW, sums of squares, scaling)
  double weight_gradient_seconds = 0;  // of model_seconds, the weight gradients' GEMMs (a split backward's W)
  // Of the model's other ops but its adds (norms, RoPE, SwiGLU, routing, embeddings, loss): the
  // ZeRO engines add gradient shards with the same add op.
  double elementwise_seconds = 0;
  std::size_t scratch = 0;
};
using OpsDigester = std::function<OpsDigest(const std::vector<RecordedOp>&)>;

struct ActionProfile {
  PipelineAction action;  // its kind, micro-batch and chunk
  std::vector<RecordedOp> ops;  // empty when the step was recorded with a digester
  OpsDigest digest;             // with a digester: the ops' digest
  GroupVolumes comm;
};

struct RankProfile {
  int micro_batches = 0;              // of the recorded step (the last one differs: it syncs gradients)
  std::vector<ActionProfile> actions;  // this rank's compute actions, in program order
  std::vector<RecordedOp> tail_ops;    // after the schedule: gradient sync, clipping, optimizer
  OpsDigest tail_digest;               // with a digester, instead of tail_ops
  GroupVolumes tail_comm;
};

// The step of pipeline rank `pp_rank` (tensor-, data- and context-parallel rank 0) of the
// checked, resolved `recipe`, recorded as if on `device`, with the recipe's micro-batch count.
// With `digest`, each action's ops (and the tail's) are digested as soon as the action ends
// and dropped: the profile holds no op lists, and the recording no more than one action's.
// Under train.document_mask its sequences hold documents of `document_tokens` tokens
// (core/plan/document_length.h; 0: one document each).
RankProfile record_rank_step(const Recipe& recipe, int pp_rank, Device device, const OpsDigester* digest = nullptr,
                             std::int64_t document_tokens = 0);

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

// The recordings a lower bound of a layout's step shares with other layouts
// (StepTimeModel::step_lower_bound), each made from `recipe`'s step_recording with a few keys
// set to what every layout sharing it may take as the bound's:
// - one layer's math (OpsDigest::model_seconds) and its tp and cp traffic: a model of `layers`
//   layers, all mixtures of experts (`moe`) or all dense, on one pipeline stage, without
//   recompute (which only adds ops) or ZeRO, two micro-batches a step (the first syncs
//   nothing). Two of them, of one layer and of two, tell a layer from the embedding and head;
//   they are shared by the layouts that differ only in their data-parallel size, pipeline,
//   ZeRO stage, shard groups and recompute policy;
// - the gradient sync, the traffic after the schedule but tp's and the optimizer, recorded
//   with micro-batches of one sequence, without recompute or sequence parallelism: shared by
//   the layouts that differ only in their micro-batch, recompute policy, sequence parallelism
//   and, between the schedules that do not split the backward, their schedule.
StepRecording layer_probe_recording(const Recipe& recipe, int layers, bool moe);
StepRecording sync_step_recording(const Recipe& recipe, int pp_rank);

}  // namespace ustrain
