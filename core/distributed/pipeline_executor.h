// The one training path: runs this rank's program of a pipeline schedule (parallel/
// pipeline_schedule.h) over the model's chunks (core/model/model_chunk.h). Single-stage
// training is the pp = 1 program.
//
// Micro-batch m of chunk c takes a free activation slot at its forward and gives it back when
// its backward (its W pass, when split) is done; a received activation or gradient waits in
// one of the chunk's receive buffers from the posting of its receive to the start of the
// compute that uses it. Consecutive communication actions are posted together as one batch
// over the pp group (Communicator::exchange), so neighbours that both send first cannot
// deadlock, and the compute that follows runs while they travel; a compute waits only for
// the receive it needs, and a slot's sends complete before the slot is reused. The numbers
// of slots and buffers the model plans are the simulator's peaks for the program, and the
// executor counts what it uses.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "core/model/llama.h"
#include "core/monitor/phase_timer.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_groups.h"
#include "parallel/comm/trace.h"

namespace ustrain {

// What a run computed on this rank: the sum of its token losses and the number of tokens
// they cover (both 0 except on the last pipeline stage). The per-token losses stay on the
// device (LlamaModel::kept_losses) until the run's end, which reads them at once and adds them
// up in double in the order the tokens were computed (a forward-only run with more
// micro-batches than the model keeps reads them whenever its rows are full).
struct PipelineLoss {
  double sum = 0;
  double tokens = 0;
};

class PipelineExecutor {
 public:
  // `pp` is the pipeline group of this rank (its index is the pipeline rank).
  PipelineExecutor(LlamaModel& model, ProcessGroup& pp, PipelineProgram program);

  const PipelineProgram& program() const { return program_; }
  // Runs the program for its micro-batches of (batch, seq) tokens; a backward starts from
  // dL/d(loss_i) = dloss on the last stage. With `timer`, each compute action's time goes to
  // its phase (forward, or backward for B and W).
  PipelineLoss run(Backend& be, std::span<const TokenBatch> micro, std::int64_t batch, std::int64_t seq,
                   float dloss, PhaseTimer* timer = nullptr);
  // Seconds the last run waited for received activations and gradients: the pipeline's
  // bubble as measured (on a GPU only what the host waited).
  double wait_seconds() const { return wait_seconds_; }

  // The most activation slots and receive buffers each chunk held at once in the last run.
  const std::vector<int>& peak_slots() const { return peak_slots_; }
  const std::vector<int>& peak_receive_buffers() const { return peak_receive_; }

  // Records each compute action (forward, backward, backward-input, backward-weight of a
  // micro-batch and chunk) and each wait for a received input as a span on the training
  // loop's track while `tracer` records; null records nothing. While it records, each action
  // ends by synchronizing the device, so that a span shows when the work finished on a GPU.
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  // With `out` (null: none), each run also leaves the last stage's per-token losses in *out,
  // (micro-batches, batch * seq) in micro-batch order (zeros on other stages): what scores
  // a task's rows (core/train/task_pass.h). Not owned.
  void set_token_losses(std::vector<float>* out) { token_losses_ = out; }

 private:
  struct SlotState {
    int micro = -1;
    std::vector<Work> sends;  // of its output activation and input gradient
  };
  struct ChunkState {
    std::vector<SlotState> slots;
    std::vector<int> free_slots, free_receive;
    std::vector<int> slot_of;                 // per micro-batch, -1 when none
    std::vector<int> activation_in, grad_in;  // per micro-batch: receive buffer, -1 when none
    std::vector<Work> receive_work;           // per receive buffer
    int slots_used = 0, receive_used = 0;
  };

  // Every chunk's slots and receive buffers free, for a run of `micro_batches`.
  void start_run(std::size_t micro_batches);
  // A free activation slot for `micro`, taking back those of done micro-batches as needed.
  int take_slot(int chunk, int micro);
  // The micro-batch is done with its slot; it is given back lazily: its sends may still be
  // travelling.
  void retire(int chunk, int micro);
  void release_slot(int chunk, int micro);
  int take_receive(int chunk);
  // The receive buffer holding `micro`'s activation (or, with `grad`, its gradient), once its
  // transfer is done; free for the next with give_back_receive after the compute read it.
  int received(int chunk, bool grad, int micro);
  void give_back_receive(int chunk, int buffer);
  void post(Backend& be, std::size_t& i, std::int64_t batch, std::int64_t seq);
  // One compute action, its input waited for; a forward on the last stage writes its per-token
  // losses into the model's next kept row, and full rows add up in `loss` (add_kept_losses).
  void compute(Backend& be, const PipelineAction& a, const TokenBatch& tokens, std::int64_t batch,
               std::int64_t seq, float dloss, PipelineLoss& loss, PhaseTimer* timer);
  // Adds the kept losses of the rows written so far (micro-batches of `tokens` each) to `loss`,
  // reading them once, and starts the rows over.
  void add_kept_losses(Backend& be, std::int64_t tokens, PipelineLoss& loss);
  int tag_of(bool grad, int stage, int micro) const;

  LlamaModel& model_;
  ProcessGroup& pp_;
  PipelineProgram program_;
  int rank_ = 0;
  bool forward_only_ = true;
  std::vector<ChunkState> chunks_;
  std::vector<int> live_;                  // per chunk: micro-batches holding a slot
  std::deque<std::pair<int, int>> done_;   // (chunk, micro) whose slots wait to be given back
  std::vector<int> peak_slots_, peak_receive_;
  std::int64_t kept_ = 0;  // rows of the model's kept losses written and not yet read
  std::vector<int> kept_micro_;  // the micro-batch of each such row
  std::vector<float>* token_losses_ = nullptr;
  double wait_seconds_ = 0;
  Tracer* tracer_ = nullptr;
};

}  // namespace ustrain
