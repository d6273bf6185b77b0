// What a run reports as it trains: the lines that open it, each step's metrics record and log
// line (loss, learning rate, gradient norm, throughput, MFU, phase times, communication, peak memory), the
// traffic of the first step, validation losses, the checkpoints saved, and the summary at the
// end. Every rank measures; the leading rank alone logs and writes the metrics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/eval/task_rows.h"
#include "core/distributed/process_layout.h"
#include "core/distributed/straggler_watch.h"
#include "core/monitor/applied_steps.h"
#include "core/monitor/expert_starvation.h"
#include "core/train/metrics_log.h"
#include "core/monitor/peak_flops.h"
#include "core/monitor/phase_timer.h"
#include "core/train/run_setup.h"
#include "core/train/take_step.h"
#include "core/train/trainer.h"

namespace ustrain {

class StepReport {
 public:
  // Opens the metrics log on the leading rank (a resumed run's continues after `start_step`)
  // and logs what the run trains on what: the model, its memory plan, the data, the peak MFU
  // is measured against, the validation split's unigram baseline.
  // `peak_cache`: where a CPU's peak FLOP/s is kept (core/monitor/peak_flops.h).
  StepReport(const Recipe& recipe, ProcessLayout& layout, TrainingRank& run, const TrainingData& data, const RunPaths& paths,
             std::int64_t start_step, const PeakCache& peak_cache);

  // The layout's data and tensor parallelism, and what each rank holds of the model.
  void log_parallelism() const;
  // Training begins: elapsed time and the estimate of the time left count from here.
  void start_clock() { started_ = PhaseTimer::Clock::now(); }

  // Before a step: the communicators count its traffic from zero.
  void begin_step();
  // After step `step`: adds it to the summary and writes its metrics record.
  void record_step(std::int64_t step, const StepResult& r, const PhaseTimer& timer);
  // Then, unless too many bad steps stopped the run: the first step's traffic and, every
  // log.interval steps, the first and the last, the step's line.
  void log_step(std::int64_t step, const StepResult& r, const PhaseTimer& timer) const;
  void validation(std::int64_t step, double val_loss);
  // The [eval] tasks' scores at `step`: logged, and one "task" metrics record ("NAME/acc", ...).
  void task_scores(std::int64_t step, const std::vector<std::pair<std::string, TaskScore>>& scores);
  // Syncs the metrics (the steps a checkpoint holds stay logged) and, when the checkpoint of
  // `step` was made now (`stall`: seconds training paused for it; nullopt when it existed
  // already), counts and logs it.
  void checkpoint_saved(std::int64_t step, std::optional<double> stall, const std::string& path,
                        std::uint64_t state_bytes);
  // Training stopped early because of `signal`; says how to continue.
  void stopped_by(int signal);
  // Logs the summary: throughput, MFU, the time per phase, memory against the plan, the
  // newest checkpoint and the metrics files.
  TrainSummary finish();

  // The rank named a straggler at the last step recorded (core/distributed/straggler_watch.h).
  const std::optional<Straggler>& straggler() const { return straggler_; }
  const TrainSummary& summary() const { return summary_; }
  // The steps this process took, how many were applied and what skipped the others.
  // `resumed`: the run continued from a checkpoint.
  AppliedSteps applied_steps(bool resumed) const;
  std::int64_t tokens_per_step() const { return tokens_per_step_; }

 private:
  void record_moe_load(std::int64_t step);
  // Warns (the leading rank) when MoE layer `layer`'s experts have starved for several steps.
  void warn_if_starving(std::int64_t step, int layer, std::span<const float> load);
  // Adds the step to the straggler watch; at the end of a log interval compares the ranks and,
  // when one is named, warns and returns its metrics fields.
  std::vector<std::pair<std::string, double>> watch_stragglers(std::int64_t step, double step_s);
  // What the metrics record and the log line of the last step share.
  struct StepNumbers {
    double dp_bytes = 0, tp_bytes = 0, pp_bytes = 0, cp_bytes = 0, ep_bytes = 0;  // counted by the communicators
    double ep_a2a_wire = 0;  // the ep group's all-to-all bytes this rank sent to other ranks
    double dp_replicate_bytes = 0;  // the part of dp_bytes sent across hybrid sharding's blocks
    double elapsed = 0, step_s = 0, tok_s = 0, mfu = 0, mfu_full_window = 0;
  };
  void record(const char* kind, const std::vector<std::pair<std::string, double>>& numbers);
  // The most memory held so far, as the end-of-run summary measures it: the backend's device
  // bytes on a GPU, the process's peak resident set on the CPU (where the backend tracks none).
  std::size_t peak_memory_bytes() const;

  const Recipe& recipe_;
  ProcessLayout& layout_;
  TrainingRank& run_;
  std::unique_ptr<MetricsLog> metrics_;  // the leading rank's
  PeakFlops peak_;
  bool peak_doubted_ = false;  // said once that a step ran above the peak
  double scale_at_start_ = 1;  // the fp16 loss scale before this process's first step
  std::int64_t start_step_;
  std::int64_t tokens_per_step_;
  double flops_per_step_;
  double full_window_flops_per_step_;  // the same counting attention over the whole window (12 L d S)
  // What a step surely computes: flops_per_step_, or under a sliding window or document masking,
  // which skip attention MFU counts, the step without attention (6 N per token).
  double done_flops_per_step_;
  double psi_bytes_;  // the Playbook's unit for data-parallel traffic: one copy of the fp32 parameters
  PhaseTimer::Clock::time_point started_ = PhaseTimer::Clock::now();
  StepNumbers last_;
  StragglerWatch stragglers_;
  ExpertStarvationWatch starvation_{10};  // a layer's experts idle for 10 steps in a row: warned about
  double blocked_at_step_start_ = 0;
  std::optional<Straggler> straggler_;
  TrainSummary summary_;
};

}  // namespace ustrain
