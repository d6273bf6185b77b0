// Pipeline schedules as data: for every pipeline rank, the ordered list of actions it runs in
// one training step. Four generators (AFAB, 1F1B, interleaved 1F1B, zero-bubble ZB-H1), one
// validator and one simulator read the same lists, and one executor (core/distributed/
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

// The empty string when the program is complete and runs: every action of every (stage,
// micro-batch) appears exactly once on the rank that holds the stage, every send has its
// receive with the same (kind, stage, micro-batch) on the peer and the other way round, every
// receive is posted before the action that uses its data, and replaying the programs with
// non-blocking transfers reaches the end on every rank (no deadlock). Otherwise the first
// problem found.
std::string validate_pipeline_program(const PipelineProgram& program);

// Costs of one action of one chunk, in any unit.
struct ActionCosts {
  double forward = 1, backward_input = 1, backward_weight = 1;
  double transfer = 0;  // from the end of a send to the data being usable on the peer
};

struct PipelineSimulation {
  double makespan = 0;                   // the step, from the first action to the last
  std::vector<double> busy;              // per rank: time spent in compute actions
  double bubble = 0;                     // idle time / compute time, summed over the ranks
  std::vector<int> peak_slots;           // per rank: micro-batch activations alive at once
  std::vector<std::vector<int>> peak_chunk_slots;  // per rank and chunk
  // Per rank and chunk: received activations and gradients waiting for the compute that uses
  // them (a receive is posted one compute early, so its buffer is not yet a slot).
  std::vector<std::vector<int>> peak_receive_buffers;
  // Per rank, the start and end of every compute action, in program order (for the timeline).
  std::vector<std::vector<std::pair<double, double>>> spans;
};

// Replays the program with these costs: each rank runs its actions in order, an action
// starting when the rank is free and its data has arrived. The activations of a micro-batch
// on a chunk live from the start of its forward to the end of its backward (its W when split);
// a receive buffer from the receive's posting to the start of the compute that uses it.
PipelineSimulation simulate_pipeline(const PipelineProgram& program, const ActionCosts& costs);

// The program as text, one row per rank, one column per time unit of the simulation with
// unit costs: the digit of the micro-batch under F, B (or b for the split input backward), W;
// '.' idle. Above `width` columns the rows are cut. For `--dry-run`.
std::string draw_pipeline_timeline(const PipelineProgram& program, int width = 160);

}  // namespace ustrain
