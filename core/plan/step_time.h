// The predicted time of one training step of a layout: every recorded op priced by the
// device's curves (calibration.h), each group's bytes by its links with the overlap rules of
// comm_cost.h, and the pipeline schedule replayed by the trainer's own simulator
// (parallel/pipeline_simulation.h) with a cost per pipeline rank, chunk and action, so that the
// embedding and head stages weigh what they compute.
#pragma once

#include <map>
#include <functional>

#include "core/plan/calibration.h"
#include "core/plan/hardware.h"
#include "core/plan/once_map.h"
#include "core/plan/step_profile.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_simulation.h"

namespace ustrain {

// The step of the slowest pipeline rank, split so that the parts add up to step_s.
struct StepTime {
  double step_s = 0;
  double compute_s = 0;       // ops, recompute included, and the optimizer
  double tp_s = 0;            // tensor/sequence-parallel collectives (blocking)
  double cp_s = 0;            // context parallelism's ring transfers not hidden under attention
  double ep_s = 0;            // expert parallelism's all-to-all of routed rows (blocking)
  double dp_s = 0;            // gradient sync and ZeRO traffic the compute does not hide
  double bubble_s = 0;        // idle inside the pipeline schedule (waits for other stages and transfers)
  double shared_cores_s = 0;  // CPU: waiting for a core the node's other ranks hold
  bool tp_across_nodes = false, dp_across_nodes = false, pp_across_nodes = false, cp_across_nodes = false,
       ep_across_nodes = false;
};

class StepTimeModel {
 public:
  // `at_once`: how many ranks of a node compute at the same time. On GPUs all of them; on a CPU
  // with more ranks than its cores hold (cores / device.threads), the ranks take turns, so a
  // step lasts at least the node's total work over `at_once`, and a pipeline's idle ranks lend
  // their cores to the busy ones.
  // `document_tokens`: the documents' length its steps are recorded with under
  // train.document_mask (core/plan/document_length.h; 0: one document per sequence).
  StepTimeModel(Hardware hw, Calibration cal, int devices_per_node, Device device, int at_once,
                std::int64_t document_tokens = 0);

  // Safe to call from several threads at once: each step is recorded once.
  StepTime predict(const Recipe& recipe);
  // With the recipe's training program already made (plan_pipeline_programs).
  StepTime predict(const Recipe& recipe, const PipelineProgram& program);
  // The op scratch of pipeline rank `pp_rank` (deviceless_op_scratch), from the same recording
  // the timing uses: a layout's memory and its time record each rank's step once between them.
  std::size_t op_scratch(const Recipe& recipe, int pp_rank);
  std::size_t recorded_steps() const { return recorded_.size(); }

  // A lower bound of predict(recipe, program).step_s, from a recording that every layout
  // differing only in its data-parallel size, ZeRO stage and shard groups shares: the pipeline
  // replayed with each action's GEMMs, attention and blocking tp and cp transfers alone. The
  // ops and traffic it leaves out (the rest of the compute, gradient sync, ZeRO's gathers, the
  // optimizer) only lengthen a step, and a pipeline replay never shortens when an action
  // lengthens. Safe to call from several threads at once.
  double step_lower_bound(const Recipe& recipe, const PipelineProgram& program);
  // A looser lower bound from the model's recording alone, without the schedule: the busiest
  // pipeline rank's compute actions, one after another (at most step_lower_bound).
  double busy_lower_bound(const Recipe& recipe);
  std::size_t bounding_steps() const { return probes_.size() + syncs_.size(); }

 private:
  struct PricedAction {
    double blocking_s = 0;  // compute + tp + cp + ep + exposed gathers (+ gradient sync without overlap)
    double compute_s = 0, tp_s = 0, cp_s = 0, ep_s = 0, gather_s = 0;
    double async_s = 0;     // gradient sync issued by this action, queued on the group
    double replicate_s = 0; // of async_s, what waits for the end of the action (hybrid sharding's all-reduce)
    std::int64_t buckets = 1;  // the calls the rest of async_s is issued in, as backward fills them
  };
  struct PricedRank {
    std::map<std::tuple<int, int, bool>, PricedAction> actions;  // (kind, chunk, last micro-batch)
    double tail_compute_s = 0, tail_comm_s = 0;
    double tail_optimizer_s = 0;  // of tail_compute_s, the optimizer's ops
    double tail_sync_s = 0;       // tail_comm_s but tp's
    double message_bytes = 0;  // one activation (or its gradient) between stages
  };
  struct RecordedRank {
    PricedRank priced;
    std::size_t op_scratch = 0;
  };
  // What step_lower_bound keeps of one micro-batch's action of a probe (layer_probe_recording).
  struct ProbeAction {
    double model_s = 0, weight_s = 0, elementwise_s = 0, attention_s = 0;
    CommVolume tp, cp, ep;
  };
  struct Probe {
    ProbeAction forward, backward;
  };
  const Probe& probe(const Recipe& recipe, int layers, bool moe);
  // Each pipeline rank's and chunk's action costs in the bounds: its layers' GEMMs, attention
  // and tp, cp and ep transfers, and the output head's GEMM on the last stage.
  StageCosts bound_costs(const Recipe& recipe, bool split_backward);
  // The priced step of sync_step_recording: its gradient sync, tail traffic and optimizer.
  const PricedRank& sync_rank(const Recipe& recipe, int pp_rank);
  // Records the step of the pipeline rank standing for `pp_rank` once, then keeps only its prices.
  const RecordedRank& recorded(const Recipe& recipe, int pp_rank);
  PricedRank price_rank(const Recipe& recipe, const RankProfile& profile) const;
  // Each pipeline rank's cost per action and chunk, for the simulator.
  static StageCosts stage_costs(const std::vector<const PricedRank*>& ranks, const PipelineProgram& program,
                                int chunks, double link_bytes_per_s, double latency_s);
  // One pipeline rank's step from its simulated compute spans and what its actions cost.
  static StepTime rank_time(const PricedRank& pr, const std::vector<PipelineAction>& actions,
                            const std::vector<std::pair<double, double>>& spans, int micro_batches);
  // One op's seconds on the calibrated device, without the cost per op.
  double op_seconds(const RecordedOp& op) const;
  // The ops' seconds (each with the cost per op), their attention's alone, and the most
  // scratch `scratch_of` (if any) gives one of them.
  OpsDigest digest(const std::vector<RecordedOp>& ops, const std::function<std::size_t(const RecordedOp&)>& scratch_of) const;

  Hardware hw_;
  Calibration cal_;
  int per_node_;
  int at_once_;
  Device device_;
  std::int64_t document_tokens_;
  // Each recorded step priced, by its key. The recorded ops themselves are dropped once priced:
  // a plan of many devices records thousands of steps, and their op lists would not fit in memory.
  OnceMap<StepKey, RecordedRank> recorded_;
  OnceMap<StepKey, Probe> probes_;      // by layer_probe_recording's key
  OnceMap<StepKey, PricedRank> syncs_;  // by sync_step_recording's key
};

}  // namespace ustrain
