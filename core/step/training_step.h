// One rank's training state and its training step, over any backend and any process groups:
// the trainer runs it on the recipe's backend over the launch's groups; a planner can run the
// step of any rank of any layout on the recording backend (kernels/record/recording_backend.h)
// over counting groups (parallel/counting_world.h), to learn what it computes and sends.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/distributed/pipeline_executor.h"
#include "core/distributed/pipeline_plan.h"
#include "core/distributed/fault_injection.h"
#include "core/distributed/param_engines.h"
#include "core/step/memory_fit.h"
#include "core/recipe/geometry.h"
#include "core/recipe/recipe.h"
#include "core/step/loss_scaler.h"
#include "core/step/lr_schedule.h"
#include "core/step/model_instance.h"
#include "core/monitor/nonfinite_steps.h"
#include "core/monitor/phase_timer.h"
#include "core/step/token_staging.h"
#include "parallel/process_groups.h"
#include "parallel/tensor_parallel.h"
#include "parallel/comm/trace.h"

namespace ustrain {

// The model's sizes on tensor-parallel rank `tp_rank`, pipeline rank `pp_rank`,
// context-parallel rank `cp_rank` and expert-parallel rank `ep_rank` of the recipe's layout,
// for its sequences.
ModelGeometry geometry_of(const Recipe& r, int tp_rank, int pp_rank, int cp_rank = 0, int ep_rank = 0);

// How a rank of the recipe's layout holds the training state: ZeRO shards each store over the
// ranks whose gradients add up, dense parameters over dp x cp (`rank` among them; under hybrid
// sharding over dp_shard x cp, the `replica`-th of the blocks), expert parameters over the
// expert-gradient group, dp x cp / ep (`expert_rank` among them).
ParamShardings sharding_of(const Recipe& r, int rank, int expert_rank, int replica = 0);
// The same over this rank's groups, sized as they are: a recording of the step (core/plan) may
// build its groups without hybrid sharding, and the store must match the group it syncs over.
ParamShardings sharding_of(const Recipe& r, ProcessGroups& groups);

// The size of the data-parallel gradient buckets training uses: a few MiB, small enough that
// most of the reduction overlaps backward on the models a CPU trains, large enough that
// per-message latency does not dominate.
inline constexpr std::size_t kGradientBucketBytes = std::size_t{4} << 20;

// Everything one rank needs to train: the recipe, this rank's geometry, tensor-parallel
// layer kinds and pipeline programs, a model instance for its micro-batches holding this
// rank's part of the state, the data-parallel engine that keeps the ranks' parts consistent,
// and the executors that run the programs. `groups` is this rank's (its ranks decide the part).
struct TrainingRank {
  const Recipe& recipe;
  ProcessGroups& groups;
  ModelGeometry geometry;
  TensorParallel tp;
  RingAttention cp;
  ExpertDispatcher ep;
  PipelinePlan pipeline;
  ModelInstance instance;
  LlamaModel& model;
  Backend& backend;
  ParamEngines engine;
  std::unique_ptr<Optimizer> optimizer;  // optim.name's (core/step/optimizer_choice.h)
  LossScaler scaler;
  PipelineExecutor train_executor, eval_executor;
  NonfiniteSteps bad_steps;
  InjectedFaults faults;  // USTRAIN_INJECT_FAULT's, for tests (core/distributed/fault_injection.h)
  // train.replica_check_grads, as the trainer sets it: a step recorded to price it (whose memory
  // is never there to read) compares nothing.
  bool checks_gradient_replicas = false;
  // The token ids of a training step's and of the validation pass's micro-batches, on their
  // way to the device (page-locked on CUDA).
  TokenStaging train_tokens, eval_tokens;

  // `saves_checkpoints`: the plan holds the checkpoint writer's host snapshot; it holds
  // `op_scratch_bytes` of op scratch (core/plan/step_scratch.h).
  TrainingRank(const Recipe& r, ProcessGroups& groups, std::unique_ptr<Backend> be, std::size_t bucket_bytes,
               MemoryShare memory, bool saves_checkpoints, std::size_t op_scratch_bytes = 0);
  TrainingRank(const TrainingRank&) = delete;
  TrainingRank& operator=(const TrainingRank&) = delete;
  // The ranks over which a sync group's store is sharded (its gradients add up over them and,
  // under hybrid sharding, over replicate_comm's; null without).
  Communicator& sync_comm(SyncGroup g);
  Communicator* replicate_comm(SyncGroup g);
  // Communicators whose traffic the metrics report.
  Communicator& gradient_comm() { return groups.gradients().for_tensors(backend.device()); }
  Communicator& expert_gradient_comm() { return groups.expert_gradients().for_tensors(backend.device()); }
  // Under hybrid sharding the block's and the replicate group's (the gradients group's without).
  Communicator& dp_shard_comm() { return groups.dp_shard().for_tensors(backend.device()); }
  Communicator& dp_replicate_comm() { return groups.dp_replicate().for_tensors(backend.device()); }
  // The data-parallel traffic: the gradient groups', the dense and the experts', and under
  // hybrid sharding the block's and the replicate group's (each communicator once).
  CommVolume data_parallel_volume();
  void reset_data_parallel_volume();
  Communicator& tp_comm() { return groups.tp().for_tensors(backend.device()); }
  Communicator& pp_comm() { return groups.pp().for_tensors(backend.device()); }
  Communicator& cp_comm() { return groups.cp().for_tensors(backend.device()); }
  Communicator& ep_comm() { return groups.ep().for_tensors(backend.device()); }
};

struct StepResult {
  double loss, grad_norm, lr;
  bool applied = true;     // false: skipped (fp16 gradients overflowed, or a bad step)
  bool nonfinite = false;  // a bad step: the loss or gradient norm is not finite (core/monitor/nonfinite_steps.h)
};

// One optimizer step over this rank's micro-batches (train.grad_accum_steps() of them, each
// (micro_batch, seq_len) tokens on the host): accumulate gradients over the micro-batches,
// clip, the recipe's optimizer (optim.name). In fp16 the loss gradient is scaled up for backward and the gradients scaled
// back down, together with clipping, in one pass (core/step/loss_scaler.h). With data
// parallelism the ZeRO engine reduces the gradients over the group while backward runs
// (core/distributed/param_engines.h: one ZeRO engine per store of parameters). Forward and backward time goes to `timer`'s phases, the
// gradient sync to backward, the update to optimizer.
StepResult train_step(TrainingRank& run, std::span<const TokenBatch> micro, const LrScheduleConfig& schedule,
                      std::int64_t step, PhaseTimer& timer, Tracer* trace);

}  // namespace ustrain
