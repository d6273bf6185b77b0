#include "core/plan/step_profile.h"

#include <chrono>

#include "core/distributed/process_layout.h"
#include "core/plan/document_length.h"
#include "core/step/run_schedule.h"
#include "core/step/training_step.h"
#include "kernels/error.h"
#include "parallel/counting_world.h"

namespace ustrain {
namespace {

GroupVolumes read_volumes(ProcessGroups& g, Device device) {
  GroupVolumes v;
  v.tp = g.tp().for_tensors(device).volume();
  v.gradients = g.gradients().for_tensors(device).volume();
  v.pp = g.pp().for_tensors(device).volume();
  v.cp = g.cp().for_tensors(device).volume();
  if (ProcessGroup* e = g.embedding()) v.embedding = e->for_tensors(device).volume();
  v.ep = g.ep().for_tensors(device).volume();
  v.expert_gradients = g.expert_gradients().for_tensors(device).volume();
  // Without hybrid sharding dp_shard is the gradients group itself, counted above.
  if (&g.dp_shard() != &g.gradients()) v.dp_shard = g.dp_shard().for_tensors(device).volume();
  v.dp_replicate = g.dp_replicate().for_tensors(device).volume();
  return v;
}

std::vector<RecordedOp> slice(const std::vector<RecordedOp>& ops, std::size_t begin, std::size_t end) {
  return {ops.begin() + static_cast<std::ptrdiff_t>(begin), ops.begin() + static_cast<std::ptrdiff_t>(end)};
}

// The fewest micro-batches per step that the recipe's schedule runs, at least two (one when
// the step has one).
std::int64_t recorded_micro_batches(const Recipe& r) {
  const std::int64_t accum = r.grad_accum_steps();
  if (accum <= 2) return accum;
  const PipelineSchedule s = parse_pipeline_schedule(r.parallel.pp_schedule);
  for (std::int64_t m = 2; m < accum; ++m)
    if (accum % m == 0 && schedule_refusal(s, {static_cast<int>(r.parallel.pp), static_cast<int>(r.parallel.virtual_stages),
                                               static_cast<int>(m)})
                              .empty())
      return m;
  return accum;
}

}  // namespace

GroupVolumes& GroupVolumes::operator-=(const GroupVolumes& o) {
  tp -= o.tp;
  gradients -= o.gradients;
  pp -= o.pp;
  cp -= o.cp;
  embedding -= o.embedding;
  ep -= o.ep;
  expert_gradients -= o.expert_gradients;
  dp_shard -= o.dp_shard;
  dp_replicate -= o.dp_replicate;
  return *this;
}

RankProfile record_rank_step(const Recipe& recipe, int pp_rank, Device device, const OpsDigester* digest,
                             std::int64_t document_tokens) {
  const MeshShape shape = mesh_shape_of(recipe);
  const Mesh mesh(shape, pp_rank * shape.dp * shape.cp * shape.tp, shape.world_size());
  const std::unique_ptr<ProcessGroups> groups = counting_process_groups(mesh, device);
  auto backend = std::make_unique<RecordingBackend>(device);
  RecordingBackend& recorder = *backend;
  TrainingRank run(recipe, *groups, std::move(backend), kGradientBucketBytes, MemoryShare{},
                   /*saves_checkpoints=*/false);
  RankProfile profile;
  profile.micro_batches = static_cast<int>(recipe.grad_accum_steps());
  for (const PipelineAction& a : run.pipeline.train.ranks[static_cast<std::size_t>(pp_rank)])
    if (is_compute(a.kind)) profile.actions.push_back({a, {}, {}, {}});
  // Every compute action ends with a synchronize while the executor traces.
  Tracer tracer;
  run.train_executor.set_tracer(&tracer);
  tracer.start(Tracer::Clock::now());
  recorder.clear();
  GroupVolumes last = read_volumes(*groups, device);
  std::size_t marks = 0, op_start = 0;
  // At the end of compute action `marks`: its ops and the bytes its groups carried. Later
  // marks (the tail's) leave their ops to the tail.
  recorder.set_synchronize_hook([&] {
    if (marks == profile.actions.size()) return;
    ActionProfile& action = profile.actions[marks++];
    const GroupVolumes now = read_volumes(*groups, device);
    action.comm = now;
    action.comm -= last;
    last = now;
    if (digest) {
      action.digest = (*digest)(recorder.ops());
      recorder.clear();
    } else {
      action.ops = slice(recorder.ops(), op_start, recorder.ops().size());
      op_start = recorder.ops().size();
    }
  });
  const std::int64_t sequences = recipe.train.micro_batch, seq_len = recipe.train.seq_len;
  const std::vector<std::int32_t> tokens(static_cast<std::size_t>(sequences * seq_len), 0);
  std::vector<std::int32_t> documents;
  if (recipe.train.document_mask) documents = regular_documents(sequences, seq_len, document_tokens);
  TokenBatch batch{tokens, tokens};
  batch.documents = documents;
  const std::vector<TokenBatch> micro(static_cast<std::size_t>(profile.micro_batches), batch);
  PhaseTimer timer;
  train_step(run, micro, schedule_of(recipe), 1, timer, nullptr);
  recorder.set_synchronize_hook({});
  USTRAIN_ASSERT(marks == profile.actions.size(), "a recorded step without a mark per compute action");
  if (digest) profile.tail_digest = (*digest)(recorder.ops());
  else profile.tail_ops = slice(recorder.ops(), op_start, recorder.ops().size());
  profile.tail_comm = read_volumes(*groups, device);
  profile.tail_comm -= last;
  return profile;
}

StepRecording step_recording(const Recipe& recipe, int pp_rank) {
  Recipe r = recipe;
  const std::int64_t m = recorded_micro_batches(r);
  r.train.global_batch = m * r.train.micro_batch * r.parallel.dp;
  r.train.eval_interval = 0;
  const ParallelSection& p = r.parallel;
  const std::vector<std::int64_t> numbers = {p.dp,  p.tp,  p.pp, p.cp, p.ep, p.zero, p.sp ? 1 : 0, p.virtual_stages,
                                             r.train.micro_batch, m, pp_rank, p.overlap_comm ? 1 : 0,
                                             p.shard_dp()};
  StepKey key{numbers, p.pp_schedule, r.train.recompute};
  return {std::move(r), std::move(key)};
}

StepRecording layer_probe_recording(const Recipe& recipe, int layers, bool moe) {
  StepRecording s = step_recording(recipe, 0);
  Recipe& r = s.recipe;
  ParallelSection& p = r.parallel;
  p.pp = 1;
  p.virtual_stages = 1;
  p.pp_schedule = "1f1b";
  p.zero = 0;
  p.dp_shard = 0;
  r.train.recompute = "none";
  r.train.global_batch = 2 * r.train.micro_batch * p.dp;  // the first micro-batch syncs no gradients
  ModelSection& m = r.model;
  m.n_layers = layers;
  if (moe) {
    m.first_dense_layers = 0;
    m.moe_layer_interval = 1;
  } else {
    m.n_experts = 0;
    p.ep = 1;  // experts only
  }
  s.key = {{p.tp, p.cp, p.ep, p.sp ? 1 : 0, r.train.micro_batch, layers, moe ? 1 : 0}, "", ""};
  return s;
}

StepRecording sync_step_recording(const Recipe& recipe, int pp_rank) {
  StepRecording s = step_recording(recipe, pp_rank);
  Recipe& r = s.recipe;
  const std::int64_t m = r.grad_accum_steps();
  r.train.micro_batch = 1;
  r.train.global_batch = m * r.parallel.dp;
  r.train.recompute = "none";
  r.parallel.sp = false;
  const ParallelSection& p = r.parallel;
  const bool split = parse_pipeline_schedule(p.pp_schedule) == PipelineSchedule::zero_bubble;
  s.key = {{p.dp, p.tp, p.pp, p.cp, p.ep, p.zero, p.virtual_stages, m, pp_rank, p.overlap_comm ? 1 : 0, p.shard_dp(),
            split ? 1 : 0},
           "", ""};
  return s;
}

}  // namespace ustrain
