// Pipeline schedules as data: every generator's program is complete and runs (the validator
// accepts it), its bubble with equal costs is the closed form of the Ultra-Scale Playbook and
// the zero-bubble paper, its memory is what the schedule promises, and the validator rejects
// programs broken by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_simulation.h"
#include "parallel/pipeline_timeline.h"
#include "parallel/pipeline_validation.h"

namespace ustrain {
namespace {

constexpr PipelineSchedule kAll[] = {PipelineSchedule::afab, PipelineSchedule::one_f_one_b,
                                     PipelineSchedule::interleaved, PipelineSchedule::zero_bubble};

// Equal costs per action of one chunk: F, B and W one unit each (B and W together two).
double closed_form_bubble(PipelineSchedule s, const PipelineShape& shape) {
  const double p = shape.ranks, m = shape.micro_batches, v = shape.chunks;
  switch (s) {
    case PipelineSchedule::afab:
    case PipelineSchedule::one_f_one_b: return (p - 1) / m;
    case PipelineSchedule::interleaved: return (p - 1) / (v * m);
    // (P - 1)(T_F + T_B - T_W) idle against M (T_F + T_B + T_W) of compute.
    case PipelineSchedule::zero_bubble: return (p - 1) / (3 * m);
  }
  return -1;
}

TEST(PipelineSchedule, EveryGeneratorIsCompleteRunsAndHasTheClosedFormBubble) {
  int programs = 0;
  for (PipelineSchedule schedule : kAll)
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 16; ++m)
        for (int v : {1, 2, 4}) {
          const PipelineShape shape{p, v, m};
          if (!schedule_refusal(schedule, shape).empty()) continue;
          SCOPED_TRACE(std::string(pipeline_schedule_name(schedule)) + " P=" + std::to_string(p) +
                       " M=" + std::to_string(m) + " V=" + std::to_string(v));
          const PipelineProgram program = make_pipeline_program(schedule, shape);
          ASSERT_EQ(validate_pipeline_program(program), "");
          const PipelineSimulation sim = simulate_pipeline(program, ActionCosts{});
          // ZB-H1's published form holds once the pipeline is full (M >= P); below that its W
          // passes cannot fill the warm-up, and it is never worse than 1F1B.
          if (schedule == PipelineSchedule::zero_bubble && m < p)
            EXPECT_LE(sim.bubble, (p - 1.0) / m + 1e-12);
          else
            EXPECT_NEAR(sim.bubble, closed_form_bubble(schedule, shape), 1e-12);
          // Memory: AFAB keeps every micro-batch; 1F1B at most P - r on rank r; ZB-H1 at
          // most P (1F1B's peak) on every rank.
          for (int r = 0; r < p; ++r) {
            const int peak = sim.peak_slots[static_cast<std::size_t>(r)];
            if (schedule == PipelineSchedule::afab) {
              EXPECT_EQ(peak, m) << "rank " << r;
            } else if (schedule == PipelineSchedule::one_f_one_b) {
              EXPECT_EQ(peak, std::min(m, p - r)) << "rank " << r;
            } else if (schedule == PipelineSchedule::zero_bubble) {
              EXPECT_LE(peak, std::min(m, p)) << "rank " << r;
            }
          }
          ++programs;
        }
  EXPECT_GT(programs, 400);
}

TEST(PipelineSchedule, RefusesShapesItCannotRun) {
  EXPECT_NE(schedule_refusal(PipelineSchedule::interleaved, {4, 1, 8}).find("virtual_stages >= 2"), std::string::npos);
  EXPECT_NE(schedule_refusal(PipelineSchedule::interleaved, {4, 2, 6}).find("must be a multiple of 4"), std::string::npos);
  EXPECT_NE(schedule_refusal(PipelineSchedule::one_f_one_b, {4, 2, 8}).find("needs parallel.pp_schedule"),
            std::string::npos);
  EXPECT_EQ(schedule_refusal(PipelineSchedule::interleaved, {4, 2, 8}), "");
}

TEST(PipelineSchedule, ForwardOnlyProgramIsCompleteAndRuns) {
  for (int p = 1; p <= 4; ++p)
    for (int v : {1, 2})
      for (int m : {1, 3, 8}) {
        const PipelineProgram program = make_forward_program({p, v, m});
        EXPECT_EQ(validate_pipeline_program(program), "") << p << " " << v << " " << m;
      }
}

// Each hand-broken program is rejected with a reason.
TEST(PipelineSchedule, ValidatorRejectsBrokenPrograms) {
  const PipelineProgram good = make_pipeline_program(PipelineSchedule::one_f_one_b, {4, 1, 8});
  ASSERT_EQ(validate_pipeline_program(good), "");
  const auto find = [](std::vector<PipelineAction>& actions, ActionKind kind, int micro) {
    return std::find_if(actions.begin(), actions.end(),
                        [&](const PipelineAction& a) { return a.kind == kind && a.micro == micro; });
  };
  {  // A forward missing.
    PipelineProgram p = good;
    p.ranks[2].erase(find(p.ranks[2], ActionKind::forward, 3));
    EXPECT_NE(validate_pipeline_program(p).find("appears 0 times"), std::string::npos) << validate_pipeline_program(p);
  }
  {  // A forward twice.
    PipelineProgram p = good;
    p.ranks[1].push_back(*find(p.ranks[1], ActionKind::forward, 0));
    EXPECT_NE(validate_pipeline_program(p).find("appears 2 times"), std::string::npos) << validate_pipeline_program(p);
  }
  {  // A send without its receive.
    PipelineProgram p = good;
    p.ranks[2].erase(find(p.ranks[2], ActionKind::recv_activation, 5));
    EXPECT_NE(validate_pipeline_program(p).find("before receiving its input"), std::string::npos)
        << validate_pipeline_program(p);
  }
  {  // A receive posted after the compute that uses it.
    PipelineProgram p = good;
    auto& r = p.ranks[3];
    const auto recv = find(r, ActionKind::recv_activation, 6);
    const PipelineAction moved = *recv;
    r.erase(recv);
    r.insert(std::next(find(r, ActionKind::forward, 6)), moved);
    EXPECT_NE(validate_pipeline_program(p).find("before receiving its input"), std::string::npos)
        << validate_pipeline_program(p);
  }
  {  // Sent to the wrong rank.
    PipelineProgram p = good;
    find(p.ranks[0], ActionKind::send_activation, 2)->peer = 2;
    EXPECT_NE(validate_pipeline_program(p).find("does not hold stage 1"), std::string::npos)
        << validate_pipeline_program(p);
  }
  {  // A deadlock: rank 1 waits for gradient 0 before sending activation 1... which rank 2's
     // backward of micro-batch 0 does not need, but rank 2 waits for activation 1 first.
    PipelineProgram p = make_pipeline_program(PipelineSchedule::afab, {2, 1, 2});
    // Rank 1 (last stage) runs BW(0) only after F(1); rank 0 runs F(1) only after BW(0).
    auto& r0 = p.ranks[0];
    const auto f1 = find(r0, ActionKind::forward, 1);
    const PipelineAction forward1 = *f1, send1 = *std::next(f1);
    r0.erase(f1, std::next(f1, 2));
    r0.insert(std::next(find(r0, ActionKind::backward, 0)), {forward1, send1});
    auto& r1 = p.ranks[1];
    const auto b0 = find(r1, ActionKind::backward, 0);
    const PipelineAction backward0 = *b0, send0 = *std::next(b0);
    r1.erase(b0, std::next(b0, 2));
    r1.insert(std::next(find(r1, ActionKind::forward, 1)), {backward0, send0});
    EXPECT_NE(validate_pipeline_program(p).find("waits forever"), std::string::npos) << validate_pipeline_program(p);
  }
}

TEST(PipelineSchedule, SimulatorUsesTheCostsItIsGiven) {
  // 1F1B, P = 2, M = 2, F = 1, B + W = 2: the last micro-batch's backward on rank 0 ends at
  // (M + P - 1) (F + B + W) = 9; with a transfer of 0.5 each of the 4 hops on the critical
  // path adds it.
  const PipelineProgram p = make_pipeline_program(PipelineSchedule::one_f_one_b, {2, 1, 2});
  EXPECT_DOUBLE_EQ(simulate_pipeline(p, ActionCosts{}).makespan, 9.0);
  ActionCosts slow_links;
  slow_links.transfer = 0.5;
  EXPECT_GT(simulate_pipeline(p, slow_links).makespan, 9.0);
  ActionCosts heavy_backward;
  heavy_backward.backward_input = 3;
  const PipelineSimulation sim = simulate_pipeline(p, heavy_backward);
  EXPECT_DOUBLE_EQ(sim.busy[0], 2 * (1 + 3 + 1));
}

TEST(PipelineSchedule, TimelineHasOneRowPerRank) {
  const std::string text = draw_pipeline_timeline(make_pipeline_program(PipelineSchedule::one_f_one_b, {4, 1, 8}));
  EXPECT_NE(text.find("rank 0  | F0 F1 F2 F3"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3  | .. .. .. F0 B0 B0 F1"), std::string::npos) << text;
  EXPECT_NE(text.find("bubble 0.375"), std::string::npos) << text;
  const std::string interleaved =
      draw_pipeline_timeline(make_pipeline_program(PipelineSchedule::interleaved, {2, 2, 4}));
  EXPECT_NE(interleaved.find("F0/0"), std::string::npos) << interleaved;
}

TEST(PipelineSchedule, TimelineLegendExplainsItsNotation) {
  const std::string one_chunk = draw_pipeline_timeline(make_pipeline_program(PipelineSchedule::one_f_one_b, {4, 1, 8}));
  EXPECT_NE(one_chunk.find("F3 is micro-batch 3"), std::string::npos) << one_chunk;
  EXPECT_NE(one_chunk.find("dots idle"), std::string::npos) << one_chunk;
  EXPECT_EQ(one_chunk.find("\u2026"), std::string::npos) << one_chunk;  // nothing cut: no cut in the legend
  const std::string chunks = draw_pipeline_timeline(make_pipeline_program(PipelineSchedule::interleaved, {2, 2, 4}));
  EXPECT_NE(chunks.find("F3/1 is micro-batch 3 on the rank's chunk 1 (its stage chunk * 2 + rank)"), std::string::npos)
      << chunks;
  // 1f1b over 4 ranks and 8 micro-batches takes 33 columns of 3 characters; 10 fit in 40.
  const std::string cut = draw_pipeline_timeline(make_pipeline_program(PipelineSchedule::one_f_one_b, {4, 1, 8}), 40);
  EXPECT_NE(cut.find("rank 0  | F0 F1 F2 F3 .. .. .. .. .. .. \u2026 +23\n"), std::string::npos) << cut;
  EXPECT_NE(cut.find("\u2026 +N: the row goes on for N more columns past the width"), std::string::npos) << cut;
}

}  // namespace
}  // namespace ustrain
