// `log.trace_steps` in a training run: records the named steps on every rank (parallel/
// trace.h) and writes RUN_DIR/trace/rank-N.json per rank and, on the leading rank,
// RUN_DIR/trace/trace.json holding every rank (core/trace/chrome_trace.h).
//
// - Clock: at the first traced step every rank passes a barrier of the world group and takes
//   its steady clock's reading as time zero. Ranks then agree to within the barrier's exit
//   skew (microseconds on one node; a fast network adds little more), steady clocks do not
//   jump, and the few seconds a trace covers cannot drift measurably. (Wall clocks would
//   carry the nodes' NTP offsets, often milliseconds: more than a layer takes.)
// - Merge: after the last traced step each rank's document travels to the leading rank over
//   the world group's host communicator, so no shared file system is assumed; this happens
//   outside the traced steps, so it does not show in the trace.
// - What is recorded: each traced step from its data through its validation and checkpoint;
//   when the range ends with the run, also the final checkpoint. A run stopped early writes
//   what it recorded.
// Every rank makes the same calls at the same steps: begin_step, end_step and finish are
// collective at the steps where they start or write.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/model/llama.h"
#include "core/recipe/recipe.h"
#include "core/trace/layer_trace.h"
#include "core/recipe/step_range.h"
#include "parallel/mesh.h"
#include "parallel/process_groups.h"
#include "parallel/comm/trace.h"

namespace ustrain {

class PipelineExecutor;

class StepTrace {
 public:
  // Off (tracer() is null, nothing is attached) when the recipe traces no step. Otherwise the
  // tracer is attached to every communicator of `groups` (create device communicators first).
  StepTrace(const Recipe& recipe, ProcessGroups& groups, const Mesh& mesh);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // Null when off: what the trainer hands to the code that records.
  Tracer* tracer() { return tracer_.get(); }
  // Per-layer spans (core/trace/layer_trace.h) between `model` and the hooks it uses, and
  // per-action spans in `executor`. Nothing when off.
  void attach(LlamaModel& model, ParamUseHooks& hooks, Backend& backend, PipelineExecutor& executor);

  // Before step `step` reads its data.
  void begin_step(std::int64_t step);
  // After step `step`, its validation and its checkpoint.
  void end_step(std::int64_t step);
  // After the training loop and the final checkpoint.
  void finish();

 private:
  void write();

  ProcessGroups& groups_;
  std::optional<StepRange> range_;
  std::int64_t last_run_step_ = 0;
  std::string dir_, run_name_, label_;
  int rank_ = 0;
  std::int64_t planned_spans_ = 0;  // what the memory plan counted (core/trace/trace_memory.h)
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<LayerTraceHooks> layer_hooks_;
  bool started_ = false, written_ = false;
  std::int64_t origin_unix_us_ = 0;
};

}  // namespace ustrain
