#include "core/checkpoint/writer.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/checkpoint/fs.h"
#include "core/checkpoint/slices.h"
#include "core/checkpoint/safetensors_file.h"
#include "data/files/crc32.h"
#include "kernels/byte_text.h"

namespace ustrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::int64_t> dims_of(const Shape& s) {
  std::vector<std::int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i]);
  return d;
}

// The rank file's entries: this rank's boxes of every state of its owned pieces, in file order;
// with `sources`, where each entry's elements live (1-D).
// The states a rank file saves, in file order.
constexpr std::pair<std::string_view, ParamState> kSavedStates[] = {
    {kStateParam, ParamState::value}, {kStateAdamM, ParamState::adam_m}, {kStateAdamV, ParamState::adam_v}};

std::vector<SafetensorsEntry> snapshot_entries(const ModelParams& params, std::vector<Tensor>* sources) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& [state, which] : kSavedStates)
    for (const ParamPiece& piece : params.owned(which)) {
      const ParamSpec& s = params.specs()[static_cast<std::size_t>(piece.param)];
      std::int64_t at = 0;
      for (const Slice& box : flat_range_boxes(dims_of(s.local), piece.begin, piece.end, s.box_begin)) {
        entries.push_back({format_shard_key({std::string(state), s.name, box}), "F32", box.extent(), 0, 0});
        if (sources) sources->push_back(piece.data.slice(at, at + box.numel()));
        at += box.numel();
      }
    }
  return entries;
}

}  // namespace

std::uint64_t checkpoint_snapshot_bytes(const ModelParams& params) {
  // The entries' boxes tile each owned piece, so the data is the pieces' fp32 elements: summed
  // here without naming every entry (a planner asks this of thousands of ranks).
  std::uint64_t elements = 0;
  for (const auto& [state, which] : kSavedStates)
    for (const ParamPiece& piece : params.owned(which)) elements += static_cast<std::uint64_t>(piece.end - piece.begin);
  return elements * safetensors_dtype_size("F32");
}

void plan_checkpoint_snapshot(const ModelParams& params, MemoryPlan& plan) {
  plan.add_host(kCheckpointSnapshot, checkpoint_snapshot_bytes(params));
}

CheckpointFile write_rank_file(const std::string& dir, int rank, std::int64_t step,
                               const std::vector<SafetensorsEntry>& entries,
                               const std::function<const void*(std::size_t)>& data_of, SaveFaults& faults) {
  CheckpointFile record;
  record.name = rank_file_name(rank);
  record.rank = rank;
  const SafetensorsMetadata metadata = {{"format", "ustrain-checkpoint-rank"},
                                        {"format_version", std::to_string(kCheckpointFormatVersion)},
                                        {"rank", std::to_string(rank)},
                                        {"step", std::to_string(step)}};
  SafetensorsWriter writer(dir + "/" + record.name, entries, metadata);
  const std::uint64_t total = entries.empty() ? 0 : entries.back().end;
  std::uint64_t done = 0;
  bool half_reported = false;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const void* data = data_of(i);
    const std::size_t bytes = entries[i].end - entries[i].begin;
    writer.write(data, bytes);
    record.checksums[entries[i].name] = crc32_label(crc32_update(0, data, bytes));
    done += bytes;
    if (!half_reported && 2 * done >= total) {
      half_reported = true;
      faults.reached("rank-file-half");
    }
  }
  writer.finish();
  record.bytes = writer.file_bytes();
  faults.reached("rank-file");
  return record;
}

void write_manifest(const std::string& dir, const CheckpointManifest& manifest) {
  write_text_file(dir + "/" + kManifestName, manifest_to_json(manifest));
}

CheckpointWriter::CheckpointWriter(CheckpointWriterConfig config, SaveFaults faults)
    : config_(std::move(config)), faults_(std::move(faults)), dir_(config_.root), host_(nullptr, +[](void*) {}) {}

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    spdlog::error("checkpoint save failed: {}", e.what());
  }
}

void CheckpointWriter::prepare(const ModelParams& params, Backend& backend) {
  if (!entries_.empty()) return;
  entries_ = snapshot_entries(params, &sources_);
  for (const ParamDecl& s : params.whole_model())  // every rank lists the whole model
    tensors_.push_back({s.name, dims_of(s.shape),
                        {std::string(kStateParam), std::string(kStateAdamM), std::string(kStateAdamV)}});
  for (const ParamDecl& s : config_.model_state) tensors_.push_back({s.name, dims_of(s.shape), {std::string(kStateParam)}});
  host_floats_ = lay_out_entries(entries_) / sizeof(float);
  host_ = backend.allocate_host_staging(host_floats_ * sizeof(float), kCheckpointSnapshot);
}

std::optional<double> CheckpointWriter::save(const ModelParams& params, Backend& backend,
                                             const TrainingProgress& progress) {
  const auto start = Clock::now();
  wait();
  const auto existing = dir_.complete_steps();
  if (std::find(existing.begin(), existing.end(), progress.step) != existing.end()) return std::nullopt;
  prepare(params, backend);

  // The only part training waits for: device state -> host snapshot.
  for (std::size_t e = 0; e < entries_.size(); ++e)
    backend.copy(Tensor(host() + entries_[e].begin / sizeof(float), sources_[e].shape), sources_[e]);
  backend.synchronize();
  const double stall = seconds_since(start);

  if (!config_.async) {
    write(progress);
    return seconds_since(start);
  }
  worker_ = std::thread([this, progress] {
    // Training threads take precedence: on a machine whose cores all compute, a writer at
    // normal priority preempts them and stalls every parallel region waiting at a barrier.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
    try {
      write(progress);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
  return stall;
}

void CheckpointWriter::wait() {
  if (worker_.joinable()) worker_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CheckpointWriter::agree(const std::string& failure, const std::string& what) const {
  std::int32_t failed = failure.empty() ? 0 : 1;
  if (config_.group) config_.group->all_reduce(Tensor(&failed, Shape{1}, DType::i32), ReduceOp::sum).wait();
  if (!failure.empty()) throw UserError(failure);
  if (failed > 0)
    throw UserError(fmt::format("{}: {} of the job's ranks failed (their messages say why)", what, failed));
}

void CheckpointWriter::write(const TrainingProgress& progress) {
  const auto start = Clock::now();
  const bool leader = rank() == 0;
  const std::string what = fmt::format("checkpoint step {} was not saved", progress.step);
  const auto attempt = [](const auto& action) -> std::string {
    try {
      action();
      return {};
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  const std::string staging = dir_.staging_path(progress.step);
  agree(attempt([&] {
          if (leader) dir_.stage(progress.step);
          faults_.reached("stage");
        }),
        what);

  // The rank file: the snapshot's entries, then the model state this rank saves (whole tensors).
  std::vector<SafetensorsEntry> entries = entries_;
  for (const auto& [name, values] : progress.model_state) {
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(values.size())};
    entries.push_back({format_shard_key({std::string(kStateParam), name, Slice::whole(shape)}), "F32", shape, 0, 0});
  }
  lay_out_entries(entries);
  CheckpointFile file;
  agree(attempt([&] {
          file = write_rank_file(
              staging, rank(), progress.step, entries,
              [&](std::size_t i) -> const void* {
                if (i < entries_.size()) return host() + entries_[i].begin / sizeof(float);
                return progress.model_state[i - entries_.size()].second.data();
              },
              faults_);
          file.data_state = progress.data_state;
          // Rank 0 reads the others' records from the shared directory the files are in.
          if (!leader) write_text_file(fmt::format("{}/rank-{:05}.json", staging, rank()), file_record_to_json(file));
        }),
        what);

  std::vector<std::int64_t> removed;
  agree(attempt([&] {
          if (!leader) return;
          CheckpointManifest m;
          m.ustrain_version = config_.ustrain_version;
          m.step = progress.step;
          m.tokens_seen = progress.tokens_seen;
          m.lr = progress.lr;
          m.loss = progress.loss;
          m.loss_scale = progress.loss_scale;
          m.backend = config_.backend;
          m.mesh = config_.mesh;
          m.tensors = tensors_;
          m.files = {file};
          const int ranks = config_.group ? config_.group->size() : 1;
          for (int r = 1; r < ranks; ++r) {
            const std::string record = fmt::format("{}/rank-{:05}.json", staging, r);
            m.files.push_back(file_record_from_json(read_text_file(record), record));
            std::filesystem::remove(record);
          }
          m.recipe = config_.recipe_toml;
          m.recipe_hash = recipe_hash(config_.recipe_toml);
          if (config_.tokenizer) m.tokenizer = write_checkpoint_tokenizer(staging, *config_.tokenizer);
          write_manifest(staging, m);
          faults_.reached("manifest");
          dir_.publish(progress.step, faults_);
          removed = dir_.retain(config_.keep_last, config_.keep_every, faults_);
        }),
        what);
  // Past the last agreement every rank sees the published checkpoint.
  const double seconds = seconds_since(start);
  spdlog::info("checkpoint step {} saved: {} ({} from this rank in {:.2f} s, {}/s){}", progress.step,
               dir_.path_of(progress.step), format_gigabytes(static_cast<double>(file.bytes)), seconds,
               format_gigabytes(static_cast<double>(file.bytes) / std::max(seconds, 1e-9)),
               removed.empty() ? "" : fmt::format("; deleted step(s) {}", fmt::join(removed, ", ")));
}

}  // namespace ustrain
