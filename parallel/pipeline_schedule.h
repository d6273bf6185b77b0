// Pipeline schedules as data: for every pipeline rank, the ordered list of actions it runs in
// one training step. Four generators (AFAB, 1F1B, interleaved 1F1B, zero-bubble ZB-H1) write
// the lists here; one validator (pipeline_validation.h), one simulator (pipeline_simulation.h)
// and the text timeline (pipeline_timeline.h) read them, and one executor (core/distributed/
// pipeline_executor.h) runs them.
//
// The model is cut into S = P * V virtual stages of consecutive layers (P pipeline ranks, V
// chunks per rank): rank r holds the stages r, r + P, r + 2P, ... as its chunks 0, 1, 2, ...
// (Megatron's interleaving; V = 1 is the plain pipeline). Every micro-batch m of the step
// runs forward through the stages in order and backward in reverse:
//   F(s, m)  forward of stage s;       needs F(s - 1, m)'s output activation
//   B(s, m)  backward for the inputs;   needs F(s, m) and B(s + 1, m)'s input gradient
//   W(s, m)  backward for the weights;  needs B(s, m). Only zero-bubble schedules split the
//            backward: the others run B and W as one action (backward).
// Communication is explicit: a forward whose next stage lives on another rank is followed by
// a send of the activation, and the consumer posts the matching receive one action before it
// needs the data, so the transfer overlaps the compute in between; gradients likewise.
// Consecutive communication actions are posted as one batch (Communicator::exchange), so two
// ranks that both send first cannot deadlock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

enum class PipelineSchedule : std::uint8_t { afab, one_f_one_b, interleaved, zero_bubble };
// "afab", "1f1b", "interleaved", "zero-bubble" (the recipe's names).
PipelineSchedule parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineSchedule s);

enum class ActionKind : std::uint8_t {
  forward,
  backward,         // B and W together
  backward_input,   // B
  backward_weight,  // W
  send_activation,
  recv_activation,
  send_grad,
  recv_grad,
};
const char* action_name(ActionKind k);  // "F", "BW", "B", "W", "send-act", ...
bool is_compute(ActionKind k);

struct PipelineAction {
  ActionKind kind = ActionKind::forward;
  int micro = 0;  // micro-batch
  int chunk = 0;  // this rank's chunk (virtual stage chunk * P + rank)
  int peer = -1;  // communication: the pipeline rank on the other side
  bool operator==(const PipelineAction&) const = default;
};

struct PipelineShape {
  int ranks = 1;          // P
  int chunks = 1;         // V, chunks per rank
  int micro_batches = 1;  // M
  int stages() const { return ranks * chunks; }
  int stage_of(int rank, int chunk) const { return chunk * ranks + rank; }
  int rank_of(int stage) const { return stage % ranks; }
  int chunk_of(int stage) const { return stage / ranks; }
};

struct PipelineProgram {
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  PipelineShape shape;
  bool split_backward = false;  // B and W are separate actions (zero-bubble)
  std::vector<std::vector<PipelineAction>> ranks;  // per pipeline rank, in order
};

// Why `schedule` cannot run `shape`, or "" when it can: interleaving needs V > 1 chunks and a
// number of micro-batches that is a multiple of P; the others need V = 1.
std::string schedule_refusal(PipelineSchedule schedule, const PipelineShape& shape);
// The program of one training step. Asserts schedule_refusal() is empty.
PipelineProgram make_pipeline_program(PipelineSchedule schedule, const PipelineShape& shape);
// Forward only (evaluation): every micro-batch through every stage, in order, with its sends.
PipelineProgram make_forward_program(const PipelineShape& shape);

}  // namespace ustrain
