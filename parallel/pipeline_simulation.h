// The pipeline simulator: replays a program (parallel/pipeline_schedule.h) with a cost per
// action, as the executor would run it with non-blocking transfers, for the step's length,
// its bubble, and the peak number of activation slots and receive buffers each chunk needs
// (the memory plan's). The validator's deadlock check is the same replay.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace ustrain {

// Costs of one action of one chunk, in any unit.
struct ActionCosts {
  double forward = 1, backward_input = 1, backward_weight = 1;
  double transfer = 0;  // from the end of a send to the data being usable on the peer
};

// Costs per pipeline rank and chunk, costs[rank][chunk]: stages differ (the first holds the
// embedding, the last the head and loss). A send's transfer is its sending chunk's.
using StageCosts = std::vector<std::vector<ActionCosts>>;

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
// Asserts that the program runs to its end (validate_pipeline_program, pipeline_validation.h).
PipelineSimulation simulate_pipeline(const PipelineProgram& program, const ActionCosts& costs);
PipelineSimulation simulate_pipeline(const PipelineProgram& program, const StageCosts& costs);

// The same replay of any program: `stuck` names the first rank that waits forever for data
// that is never sent (and the simulation is then incomplete), empty when every rank finishes.
struct PipelineReplay {
  PipelineSimulation result;
  std::string stuck;
};
PipelineReplay replay_pipeline(const PipelineProgram& program, const ActionCosts& costs);
PipelineReplay replay_pipeline(const PipelineProgram& program, const StageCosts& costs);

}  // namespace ustrain
