// What a run settles before its first step, in the order it must: the data (checked before
// anything is allocated), the device and the model, the run directory (checked by every rank,
// then locked and prepared by the leading one), the session's record, and the state training
// starts from; then the checkpoint writer.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/dir.h"
#include "core/train/resume.h"
#include "core/checkpoint/writer.h"
#include "core/plan/step_scratch.h"
#include "core/distributed/process_layout.h"
#include "core/run/run_lock.h"
#include "core/run/run_record.h"
#include "core/trace/step_trace.h"
#include "core/train/take_step.h"
#include "core/train/trainer.h"
#include "parallel/launch.h"
#include "parallel/world.h"

namespace ustrain {

// What train() learns before training: the launch, the host's memory before any rank
// allocated, the defaults it filled in (and the layout it chose), the run directory's record
// of the session, and the world when choosing the layout started it.
struct TrainStart {
  ProcessInfo launch;
  std::size_t host_memory = 0;
  std::vector<std::string> filled;
  RunRecord& record;
  std::unique_ptr<World> world;  // null: the process layout starts it
  nlohmann::json auto_layout;    // parallel.layout = "auto": what run.json records of the choice
};

// Where the run lives, and the checkpoint that --resume names (nullopt: a new start, also for
// --resume auto before the run's first checkpoint).
struct RunPaths {
  RunPaths(const Recipe& recipe, const TrainOptions& options);
  std::string run_dir;
  std::string metrics_path;  // RUN_DIR/metrics.jsonl
  CheckpointDirectory checkpoints;
  std::optional<std::string> resume_from;
};

// Declared in the order of construction, which is the order of the checks, and of
// destruction, which releases the run directory last.
struct RunSetup {
  RunSetup(const Recipe& recipe, const TrainOptions& options, TrainStart& ts, ProcessLayout& layout,
           const RunPaths& paths);
  RunSetup(const RunSetup&) = delete;
  RunSetup& operator=(const RunSetup&) = delete;

  // Opened and checked before anything is allocated; the ranks of one tensor-parallel group
  // read the same part.
  TrainingData data;
  // The device and its memory next (a missing GPU or too little memory is reported before
  // anything is written); the run takes the backend.
  std::unique_ptr<Backend> device;
  MemoryShare memory;
  // The op scratch the plan holds: the step's ops recorded and sized by the device (on CUDA
  // its cuDNN attention plans are made now, before the plan is checked); none on the CPU.
  StepScratch op_scratch;
  // log.trace_steps: declared before the run, whose operations in flight it may still record.
  StepTrace trace;
  TrainingRank run;
  std::optional<RunLock> lock;  // held by the leading rank
  ResumedRun start;             // where training continues: step 0 for a new start

 private:
  std::optional<RunLock> take_run_directory(const Recipe& recipe, const TrainOptions& options,
                                            ProcessLayout& layout, const RunPaths& paths);
  ResumedRun load_state(const Recipe& recipe, const TrainOptions& options, ProcessLayout& layout,
                        const RunPaths& paths);
};

// Whether the run saves any checkpoint (every checkpoint.interval steps, or at the end): only
// then does it plan and hold the writer's host snapshot.
bool saves_checkpoints(const Recipe& recipe, const TrainOptions& options);

// Every rank saves its chunk of the state; rank 0 also the manifest and the tokenizer. Checks
// that the run can save when it will, and logs where and when it does.
std::unique_ptr<CheckpointWriter> open_checkpoint_writer(const Recipe& recipe, const TrainOptions& options,
                                                         ProcessLayout& layout, const RunPaths& paths, TrainingRank& run);

}  // namespace ustrain
