// Pipeline parallelism on 2 and 4 ranks against one rank: every schedule's executor gives the
// one-rank model's loss and, on every stage, its parameters' gradients (a tied embedding's two
// copies summed over the first and last stages), and holds at most the activation slots the
// simulator predicts, exactly as many at its peak.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/distributed/gradient_sync.h"
#include "core/distributed/pipeline_executor.h"
#include "core/model/llama.h"
#include "parallel/pipeline_simulation.h"
#include "parallel/process_groups.h"
#include "tests/mpi/mpi_test_world.h"
#include "tests/mpi/tiny_model.h"
#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using mpi_test::TinyModel;
using mpi_test::world;

constexpr std::int64_t kBatch = 2, kSeq = 6;
constexpr std::uint64_t kSeed = 5;

ModelSection model_config(bool tied) {
  ModelSection m = mpi_test::tiny_model_config(tied);
  m.vocab_size = 11;
  m.n_layers = 8;
  m.max_seq_len = kSeq;
  return m;
}

double relative_error(const Tensor& got, const Tensor& want) {
  double diff = 0, norm = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    diff += (got.f32()[i] - want.f32()[i]) * static_cast<double>(got.f32()[i] - want.f32()[i]);
    norm += want.f32()[i] * static_cast<double>(want.f32()[i]);
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

void check_schedule(PipelineSchedule schedule, int chunks, int micro_batches, bool tied) {
  SCOPED_TRACE(std::string(pipeline_schedule_name(schedule)) + ", " + std::to_string(micro_batches) +
               " micro-batches" + (tied ? ", tied embeddings" : ""));
  ProcessGroup pp("pp", world().everyone());
  const int p = pp.size(), r = pp.rank();
  const ModelSection cfg = model_config(tied);
  std::vector<std::vector<std::int32_t>> ids, targets;
  std::vector<TokenBatch> tokens;
  for (int m = 0; m < micro_batches; ++m) {
    ids.push_back(test::random_ids(kBatch * kSeq, 11, 100 + static_cast<std::uint32_t>(m)));
    targets.push_back(test::random_ids(kBatch * kSeq, 11, 200 + static_cast<std::uint32_t>(m)));
  }
  for (int m = 0; m < micro_batches; ++m) tokens.push_back({ids[static_cast<std::size_t>(m)], targets[static_cast<std::size_t>(m)]});
  const float dloss = 1.0f / static_cast<float>(micro_batches * kBatch * kSeq);

  // One rank: the whole model, micro-batch after micro-batch.
  TinyModel whole(cfg, kBatch, kSeq, Recompute::none, {}, kSeed);
  double want = 0;
  for (int m = 0; m < micro_batches; ++m) {
    want += whole.model.forward(*whole.backend, tokens[static_cast<std::size_t>(m)], kBatch, kSeq);
    whole.model.backward(*whole.backend, dloss);
  }

  // This rank's stage, run by the schedule's program with the simulator's slots.
  const PipelineProgram program = make_pipeline_program(schedule, {p, chunks, micro_batches});
  const PipelineSimulation sim = simulate_pipeline(program, ActionCosts{});
  SlotPlan slots;
  for (int c = 0; c < chunks; ++c) {
    slots.slots.push_back(std::max(1, sim.peak_chunk_slots[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]));
    slots.receive_buffers.push_back(sim.peak_receive_buffers[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]);
  }
  slots.split_backward = program.split_backward;
  const ModelGeometry geometry = ModelGeometry::of(cfg, ModelSplit{1, 0, false, p, r, chunks}, kSeq);
  TinyModel stage(cfg, geometry, kBatch, Recompute::none, {.slots = slots}, kSeed);
  PipelineExecutor executor(stage.model, pp, program);
  const PipelineLoss got = executor.run(*stage.backend, tokens, kBatch, kSeq, dloss);
  const double total = pp.sum(got.sum), total_tokens = pp.sum(got.tokens);
  EXPECT_NEAR(total, want, 1e-5 * std::abs(want));
  EXPECT_EQ(total_tokens, static_cast<double>(micro_batches * kBatch * kSeq));
  for (int c = 0; c < chunks; ++c)
    EXPECT_EQ(executor.peak_slots()[static_cast<std::size_t>(c)],
              sim.peak_chunk_slots[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)])
        << "chunk " << c << " on rank " << r;

  // A tied embedding's copies add up over the first and last stages.
  std::unique_ptr<ProcessGroup> embedding;
  if (r == 0 || r == p - 1)
    embedding = std::make_unique<ProcessGroup>("embedding", world().communicator({0, p - 1}, "embedding"));
  if (tied) sum_tied_grads(stage.model.params(), embedding.get());
  std::map<std::string, int> reference;
  for (std::size_t i = 0; i < whole.model.params().specs().size(); ++i)
    reference[whole.model.params().specs()[i].name] = static_cast<int>(i);
  const ModelParams& held = stage.model.params();
  for (std::size_t i = 0; i < held.specs().size(); ++i) {
    const std::string& name = held.specs()[i].name;
    EXPECT_LT(relative_error(held[static_cast<int>(i)].grad, whole.model.params()[reference.at(name)].grad), 1e-5)
        << name << " on rank " << r;
  }
}

TEST(Pipeline, EveryScheduleMatchesOneRank) {
  const int p = world().size();
  for (bool tied : {false, true}) {
    check_schedule(PipelineSchedule::afab, 1, 4, tied);
    check_schedule(PipelineSchedule::one_f_one_b, 1, 8, tied);
    check_schedule(PipelineSchedule::one_f_one_b, 1, 1, tied);
    check_schedule(PipelineSchedule::zero_bubble, 1, 2 * p, tied);
    check_schedule(PipelineSchedule::interleaved, 2, 2 * p, tied);
  }
}

TEST(Pipeline, ForwardOnlyProgramGivesTheLoss) {
  ProcessGroup pp("pp", world().everyone());
  const int p = pp.size(), r = pp.rank(), micro_batches = 3;
  const ModelSection cfg = model_config(true);
  std::vector<std::vector<std::int32_t>> ids, targets;
  std::vector<TokenBatch> tokens;
  for (int m = 0; m < micro_batches; ++m) {
    ids.push_back(test::random_ids(kBatch * kSeq, 11, 300 + static_cast<std::uint32_t>(m)));
    targets.push_back(test::random_ids(kBatch * kSeq, 11, 400 + static_cast<std::uint32_t>(m)));
  }
  for (int m = 0; m < micro_batches; ++m) tokens.push_back({ids[static_cast<std::size_t>(m)], targets[static_cast<std::size_t>(m)]});
  TinyModel whole(cfg, kBatch, kSeq, Recompute::none, {}, kSeed);
  double want = 0;
  for (const TokenBatch& t : tokens) want += whole.model.forward(*whole.backend, t, kBatch, kSeq);
  for (int chunks : {1, 2}) {
    const PipelineProgram program = make_forward_program({p, chunks, micro_batches});
    const PipelineSimulation sim = simulate_pipeline(program, ActionCosts{});
    SlotPlan slots;
    for (int c = 0; c < chunks; ++c) {
      slots.slots.push_back(1);
      slots.receive_buffers.push_back(sim.peak_receive_buffers[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]);
    }
    const ModelGeometry geometry = ModelGeometry::of(cfg, ModelSplit{1, 0, false, p, r, chunks}, kSeq);
    TinyModel stage(cfg, geometry, kBatch, Recompute::none, {.slots = slots}, kSeed);
    PipelineExecutor executor(stage.model, pp, program);
    const PipelineLoss got = executor.run(*stage.backend, tokens, kBatch, kSeq, 0.0f);
    EXPECT_NEAR(pp.sum(got.sum), want, 1e-5 * want) << chunks << " chunk(s)";
  }
}

}  // namespace
}  // namespace ustrain
