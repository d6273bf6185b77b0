#include "core/train/run_setup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <utility>

#include "core/checkpoint/locate.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/tokenizer.h"
#include "core/distributed/fail_together.h"
#include "core/step/memory_fit.h"
#include "core/run/run_file.h"
#include "core/run/run_start.h"
#include "core/train/gpu_sharing.h"
#include "core/step/model_instance.h"
#include "core/step/router_balance.h"
#include "kernels/tensor.h"
#include "parallel/comm/staged_communicator.h"

namespace ustrain {
namespace {

// This rank's share of the host's memory is checked before the data or the model takes any.
TrainingData open_training_data(const Recipe& recipe, const TrainOptions& options, ProcessLayout& layout,
                                const TrainStart& ts) {
  check_host_fits(recipe, ts.host_memory, ts.launch.local_world_size, saves_checkpoints(recipe, options));
  return TrainingData(recipe, layout.data_reader(), layout.data_readers(), layout.context());
}

// This rank's backend and the groups' device communicators: NCCL when every rank has a GPU
// of its own; host-staged when ranks share one (NCCL refuses two ranks on one GPU) or when
// the recipe asks for it (on the CPU too, where it tests the staged path). Local rank i uses
// GPU i, or GPU i mod the GPUs visible when a node has more ranks than GPUs.
std::unique_ptr<Backend> open_device(const Recipe& recipe, ProcessLayout& layout, int local_ranks) {
  const std::string& comm = recipe.parallel.device_comm;
  const int gpus = recipe.device.type == "cuda" ? visible_gpus() : 0;
  const int index = gpus > 0 ? layout.local_rank() % gpus : layout.local_rank();
  std::unique_ptr<Backend> device = make_recipe_backend(recipe, index);
  const bool cuda = device->device() == Device::cuda;
  const bool shared = cuda && ranks_share_a_gpu(layout.groups().world(), gpu_uuid(index));
  if (shared && comm == "nccl")
    throw UserError(fmt::format("parallel.device_comm = \"nccl\": ranks of this job share a GPU ({} ranks and {} "
                                "GPU{} on this node), and NCCL refuses two ranks on one GPU; start one rank per "
                                "GPU, or set parallel.device_comm = \"staged\" (or \"auto\")",
                                local_ranks, gpus, gpus == 1 ? "" : "s"));
  const bool staged = comm == "staged" || shared;
  if (staged && recipe.train.precision == "fp16" && recipe.parallel.tp > 1)
    throw UserError("train.precision = \"fp16\" with parallel.tp > 1 through the host-staged communicator: MPI "
                    "has no fp16 sum for the tensor-parallel reductions; use train.precision = \"bf16\", or one "
                    "GPU per rank (NCCL)");
  if (staged) {
    if (shared && layout.groups().world().rank() == 0)
      spdlog::warn("ranks share GPUs ({} ranks and {} GPU{} on this node): tensors between ranks go device -> host "
                   "-> MPI -> device (parallel.device_comm = \"staged\"), much slower than NCCL",
                   local_ranks, gpus, gpus == 1 ? "" : "s");
    layout.groups().attach_devices([&backend = *device](ProcessGroup& g) -> std::unique_ptr<Communicator> {
      return std::make_unique<StagedCommunicator>(g.host(), backend, g.label());
    });
  } else if (cuda) {
    layout.groups().attach_devices({index, device->compute_stream()}, layout.comm_options());
  }
  return device;
}

// Refuses to start over an old run unless told to replace it, and a run directory whose
// files are symbolic links (core/run/run_file.h); with `writes`, also creates the run
// directory and writes the resolved recipe into it.
void prepare_run_directory(const Recipe& recipe, const TrainOptions& options, const CheckpointDirectory& checkpoints,
                           bool resuming, bool writes) {
  const std::string run_dir = recipe.run_dir();
  const std::string metrics_path = run_dir + "/metrics.jsonl";
  check_run_files(run_dir, {"recipe.toml", "train.log", "metrics.jsonl", "metrics.jsonl.tmp", "run.json",
                            "run.json.tmp"});
  std::error_code ec;
  if (!resuming) {
    const bool held = std::filesystem::exists(metrics_path) || !checkpoints.complete_steps().empty();
    if (held && !options.overwrite && options.resume.empty())
      throw UserError(fmt::format("run directory {} already holds a run; continue it with --resume auto, pick "
                                  "another run.name (--set run.name=NEW) or pass --overwrite to replace it",
                                  run_dir));
    if (!writes) return;
    // A new start (or --resume auto before the first checkpoint) begins the metrics afresh.
    std::filesystem::remove(metrics_path, ec);
    if (options.overwrite) checkpoints.remove_all();
  }
  if (!writes) return;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) throw UserError(fmt::format("cannot create run directory {}: {}", run_dir, ec.message()));
  write_run_file(run_dir + "/recipe.toml", to_toml(recipe), /*durable=*/false);
}

}  // namespace

RunPaths::RunPaths(const Recipe& recipe, const TrainOptions& options)
    : run_dir(recipe.run_dir()), metrics_path(run_dir + "/metrics.jsonl"), checkpoints(run_dir + "/checkpoints") {
  if (!options.resume.empty()) resume_from = find_resume_checkpoint(options.resume, run_dir);
}

RunSetup::RunSetup(const Recipe& recipe, const TrainOptions& options, TrainStart& ts, ProcessLayout& layout,
                   const RunPaths& paths)
    : data(open_training_data(recipe, options, layout, ts)),
      device(open_device(recipe, layout, ts.launch.local_world_size)),
      memory(memory_share(device->device(), ts.host_memory, ts.launch.local_world_size)),
      op_scratch(backend_op_scratch(recipe, layout.groups().pp().rank(), *device)),
      trace(recipe, layout.groups(), layout.mesh()),
      run(recipe, layout.groups(), std::move(device), kGradientBucketBytes, memory,
          saves_checkpoints(recipe, options), op_scratch.bytes) {
  if (op_scratch.bytes > 0)
    spdlog::info("op scratch: {} planned, the most any op of the step takes ({})", format_bytes(op_scratch.bytes),
                 op_scratch.op);
  trace.attach(run.model, run.engine, run.backend, run.train_executor);
  // On the CPU the host buffers were checked with the plan (check_host_fits and the model's
  // own check); a GPU's check counted only its arenas.
  if (run.backend.device() != Device::cpu)
    check_host_buffers_fit(run.instance.plan, ts.host_memory, ts.launch.local_world_size, memory_check_of(recipe),
                           static_cast<std::size_t>(data_batch_bytes(recipe)));
  lock = take_run_directory(recipe, options, layout, paths);
  ts.record.start({paths.run_dir, !paths.resume_from.has_value(), ts.launch, paths.resume_from.value_or(""),
                   ts.auto_layout},
                  layout.groups().world().host(), layout.leads());
  for (const std::string& filled : ts.filled) spdlog::info("{}", filled);
  start = load_state(recipe, options, layout, paths);
}

// Every rank checks the run directory before the leading rank locks and changes it.
std::optional<RunLock> RunSetup::take_run_directory(const Recipe& recipe, const TrainOptions& options,
                                                    ProcessLayout& layout, const RunPaths& paths) {
  const CheckpointDirectory& checkpoints = paths.checkpoints;
  const std::optional<std::string>& resume_from = paths.resume_from;
  prepare_run_directory(recipe, options, checkpoints, resume_from.has_value(), /*writes=*/false);
  layout.barrier();
  std::optional<RunLock> lock;
  fail_together(layout.groups().world().host(), [&] {
    if (!layout.leads()) return;
    lock = lock_run_directory(paths.run_dir, options.resume, resume_from);
    prepare_run_directory(recipe, options, checkpoints, resume_from.has_value(), /*writes=*/true);
    checkpoints.remove_leftovers();
  });
  return lock;
}

// The checkpoint to resume, the initial weights of checkpoint.init_from, or a seeded
// initialisation.
ResumedRun RunSetup::load_state(const Recipe& recipe, const TrainOptions& options, ProcessLayout& layout,
                                const RunPaths& paths) {
  const CheckpointDirectory& checkpoints = paths.checkpoints;
  const std::optional<std::string>& resume_from = paths.resume_from;
  Backend& be = run.backend;
  const ModelParams& params = run.model.params();
  ResumedRun start;
  if (resume_from) {
    start = resume_training(*resume_from, recipe, options.force_resume, checkpoints, params, be, data,
                           layout.leads(), model_state_of(run.model, run.backend, false));
    if (layout.leads()) drop_metrics_after(paths.metrics_path, start.step);
    run.scaler.restore(start.loss_scale);
  } else if (!recipe.checkpoint.init_from.empty()) {
    const CheckpointReader initial(locate_checkpoint(recipe.checkpoint.init_from));
    load_model_state(initial, params, be, /*with_optimizer=*/false, model_state_of(run.model, run.backend, false));
    spdlog::info("initial weights from {} (step {} of the run that wrote it)", initial.dir(), initial.manifest().step);
  } else {
    run.model.initialise(be, recipe.run.seed);
  }
  return start;
}

bool saves_checkpoints(const Recipe& recipe, const TrainOptions& options) {
  return recipe.checkpoint.interval > 0 || options.save_final;
}

std::unique_ptr<CheckpointWriter> open_checkpoint_writer(const Recipe& recipe, const TrainOptions& options,
                                                         ProcessLayout& layout, const RunPaths& paths, TrainingRank& run) {
  const CheckpointDirectory& checkpoints = paths.checkpoints;
  Backend& be = run.backend;
  const ModelParams& params = run.model.params();
  const CheckpointSection& ck = recipe.checkpoint;
  auto writer = std::make_unique<CheckpointWriter>(
      CheckpointWriterConfig{checkpoints.root(), ck.keep_last, ck.keep_every, ck.async, to_toml(recipe),
                             options.ustrain_version, be.name(), layout.mesh().shape(), layout.checkpoint_group(),
                             dataset_tokenizer_snapshot(recipe.data), model_state_of(run.model, be, false).whole_model},
      SaveFaults::from_environment());
  // The host snapshot (12 bytes per parameter this rank saves) exists only in a run that saves,
  // whose memory plan holds it.
  const bool saves = saves_checkpoints(recipe, options);
  if (saves) {
    writer->prepare(params, be);
    USTRAIN_ASSERT(writer->state_bytes() == run.instance.plan.host_bytes(kCheckpointSnapshot),
                   "the checkpoint snapshot differs from the memory plan's");
    check_can_save(layout, checkpoints.root(), writer->state_bytes());
  }
  const std::string end = options.save_final ? " and at the end" : "";
  spdlog::info("checkpoints: {} {} | keep the last {}{} | written {} | host snapshot {}", checkpoints.root(),
               ck.interval > 0 ? fmt::format("every {} steps{}", ck.interval, end)
               : options.save_final ? std::string("at the end")
                                    : std::string("none (this run saves no checkpoint)"),
               ck.keep_last, ck.keep_every > 0 ? fmt::format(" and steps that are multiples of {}", ck.keep_every) : std::string(),
               ck.async ? "in the background" : "before training continues",
               saves ? format_bytes(writer->state_bytes()) : std::string("none"));
  return writer;
}

}  // namespace ustrain
