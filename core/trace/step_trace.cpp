#include "core/trace/step_trace.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <vector>

#include "core/distributed/pipeline_executor.h"
#include "core/run/run_file.h"
#include "core/trace/chrome_trace.h"
#include "core/trace/trace_memory.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// "pp 1, tp 0": this rank's place along the mesh's dimensions of more than one rank.
std::string mesh_label(const Mesh& mesh) {
  std::string label;
  for (MeshDim d : {MeshDim::pp, MeshDim::dp, MeshDim::cp, MeshDim::tp}) {
    if (mesh.shape().size(d) == 1) continue;
    label += fmt::format("{}{} {}", label.empty() ? "" : ", ", mesh_dim_name(d), mesh.coord(d));
  }
  return label;
}

// Writes `text` to `path` (never through a link: core/run/run_file.h); a failure is reported
// and training goes on (a trace is not worth losing the run).
bool write_file(const std::string& path, const std::string& text) {
  try {
    write_run_file(path, text, /*durable=*/false);
    return true;
  } catch (const UserError& e) {
    spdlog::warn("could not write the trace: {}", e.what());
    return false;
  }
}

// Every rank's document on rank 0 (in rank order; empty elsewhere). Collective over `world`.
// Documents travel as 32-bit words (MPI counts elements in an int): each one is padded with
// spaces, which JSON ignores, to whole words.
std::vector<std::string> gather_documents(Communicator& world, std::string mine) {
  const int n = world.size();
  if (n == 1) return {std::move(mine)};
  mine.append((4 - mine.size() % 4) % 4, ' ');
  std::vector<double> words(static_cast<std::size_t>(n));
  double own = static_cast<double>(mine.size() / 4);
  world.all_gather(Tensor(words.data(), Shape{n}, DType::f64), Tensor(&own, Shape{1}, DType::f64)).wait();
  for (double w : words)
    if (w > static_cast<double>(std::numeric_limits<int>::max())) {
      spdlog::warn("a rank's trace holds more than 8 GiB; trace.json is not written (each rank-N.json is)");
      return {};
    }
  constexpr int kTag = 1;
  if (world.rank() != 0) {
    world.send(Tensor(mine.data(), Shape{static_cast<std::int64_t>(mine.size() / 4)}, DType::u32), 0, kTag).wait();
    return {};
  }
  std::vector<std::string> docs(static_cast<std::size_t>(n));
  docs[0] = std::move(mine);
  std::vector<Work> receives;
  for (int r = 1; r < n; ++r) {
    std::string& doc = docs[static_cast<std::size_t>(r)];
    const auto count = static_cast<std::int64_t>(words[static_cast<std::size_t>(r)]);
    doc.resize(static_cast<std::size_t>(count) * 4);
    receives.push_back(world.recv(Tensor(doc.data(), Shape{count}, DType::u32), r, kTag));
  }
  wait_all(receives);
  return docs;
}

}  // namespace

StepTrace::StepTrace(const Recipe& recipe, ProcessGroups& groups, const Mesh& mesh)
    : groups_(groups),
      range_(parse_step_range(recipe.log.trace_steps)),
      last_run_step_(recipe.train.steps),
      dir_(recipe.run_dir() + "/trace"),
      run_name_(recipe.run.name),
      label_(mesh_label(mesh)),
      rank_(mesh.rank()),
      planned_spans_(range_ ? (range_->last - range_->first + 1) * trace_spans_per_step(recipe) : 0) {
  if (!range_) return;
  tracer_ = std::make_unique<Tracer>();
  groups_.set_tracer(tracer_.get());
}

StepTrace::~StepTrace() {
  if (tracer_) groups_.set_tracer(nullptr);
}

void StepTrace::attach(LlamaModel& model, ParamUseHooks& hooks, Backend& backend, PipelineExecutor& executor) {
  if (!tracer_) return;
  layer_hooks_ = std::make_unique<LayerTraceHooks>(hooks, *tracer_, backend);
  model.set_param_hooks(layer_hooks_.get());
  executor.set_tracer(tracer_.get());
}

void StepTrace::begin_step(std::int64_t step) {
  if (!tracer_ || !range_->contains(step)) return;
  if (!started_) {
    groups_.world().host().barrier().wait();  // the common time zero
    tracer_->start(Tracer::Clock::now());
    origin_unix_us_ = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    started_ = true;
  }
  tracer_->set_step(step);
}

void StepTrace::end_step(std::int64_t step) {
  if (tracer_ && step == range_->last && step < last_run_step_) write();
}

void StepTrace::finish() {
  if (tracer_) write();
}

void StepTrace::write() {
  if (!started_ || written_) return;
  written_ = true;
  tracer_->stop();
  const std::map<std::string, std::string> other = {
      {"run", run_name_},
      {"traced", describe(*range_)},
      {"clock", "microseconds of each rank's steady clock since a barrier of every rank at the first traced step"},
      {"wall_clock_at_zero_unix_us", std::to_string(origin_unix_us_)}};
  const std::vector<TraceEvent> events = tracer_->events();
  const auto spans = static_cast<std::int64_t>(events.size());
  if (spans > planned_spans_)  // the memory plan counted planned_spans_ (core/trace/trace_memory.h)
    spdlog::warn("the trace of {} holds {} spans on rank {}, more than the {} its memory plan allows for", describe(*range_),
                 spans, rank_, planned_spans_);
  std::string doc = chrome_trace_json(events, tracer_->track_names(), TraceProcess{rank_, label_}, other);
  tracer_->clear();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  write_file(fmt::format("{}/rank-{}.json", dir_, rank_), doc);
  const std::vector<std::string> docs = gather_documents(groups_.world().host(), std::move(doc));
  if (rank_ != 0 || docs.empty()) return;
  const std::string merged = dir_ + "/trace.json";
  if (write_file(merged, merge_chrome_traces(docs)))
    spdlog::info("trace of {}: {} ({} spans on rank 0; open it in https://ui.perfetto.dev)", describe(*range_), merged,
                 spans);
}

}  // namespace ustrain
