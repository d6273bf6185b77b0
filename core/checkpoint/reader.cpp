#include "core/checkpoint/reader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string_view>

#include "core/checkpoint/fs.h"
#include "data/files/crc32.h"
#include "data/files/path_status.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

std::vector<std::int64_t> dims_of(const Shape& s) {
  std::vector<std::int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i]);
  return d;
}

// A checkpoint in a step-N directory (not one made by `ckpt import`, or reached through a
// link) must say step N.
void check_step_matches_directory(const std::string& dir, std::int64_t step, const std::string& manifest_path) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  const std::string name = (ec ? fs::path(dir) : real).filename().string();
  constexpr std::string_view prefix = "step-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return;
  const std::string digits = name.substr(prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return;
  if (std::stoll(digits) != step)
    throw UserError(fmt::format("{} says step {}, but its directory is {}: the manifest was edited or the directory "
                                "renamed; use an earlier checkpoint",
                                manifest_path, step, name));
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (const PathStatus status = path_status(dir_); status.access != PathAccess::exists)
    throw UserError(fmt::format("checkpoint {} {}", dir_, describe_unusable(status)));
  if (!fs::is_directory(dir_, ec)) throw UserError(fmt::format("checkpoint {} is not a directory", dir_));
  const std::string manifest_path = dir_ + "/" + kManifestName;
  if (!fs::exists(manifest_path, ec))
    throw UserError(fmt::format("{} is not a complete checkpoint: it has no {} (a save that did not finish, or not "
                                "a checkpoint directory)",
                                dir_, kManifestName));
  manifest_ = manifest_from_json(read_text_file(manifest_path), manifest_path);
  if (!manifest_.checksummed)
    spdlog::warn("{} has no manifest_crc32 (format version {}, written by ustrain {} before manifests carried one): "
                 "an edit of it cannot be detected",
                 manifest_path, manifest_.format_version, manifest_.ustrain_version);
  check_step_matches_directory(dir_, manifest_.step, manifest_path);
  if (recipe_hash(manifest_.recipe) != manifest_.recipe_hash)
    throw UserError(fmt::format("{}: the recipe does not match its hash; the manifest was edited or damaged",
                                manifest_path));
  for (const CheckpointFile& record : manifest_.files) {
    const std::string path = dir_ + "/" + record.name;
    if (!fs::exists(path, ec))
      throw UserError(fmt::format("checkpoint {} lacks the rank file {} that {} lists: copy the whole checkpoint "
                                  "directory, or use an earlier checkpoint",
                                  dir_, path, kManifestName));
    const auto size = fs::file_size(path, ec);
    if (ec || size != record.bytes)
      throw UserError(fmt::format("{} is truncated or damaged: it has {} bytes, {} says {}; use an earlier "
                                  "checkpoint",
                                  path, ec ? 0 : size, kManifestName, record.bytes));
    files_.push_back(std::make_unique<SafetensorsReader>(path));
    index_file(record, *files_.back());
  }
  check_coverage();
}

void CheckpointReader::index_file(const CheckpointFile& record, const SafetensorsReader& file) {
  const SafetensorsMetadata& meta = file.header().metadata;
  const auto format = meta.find("format");
  const auto rank = meta.find("rank");
  if (format == meta.end() || format->second != "ustrain-checkpoint-rank" || rank == meta.end() ||
      rank->second != std::to_string(record.rank))
    throw UserError(fmt::format("{} is not rank {}'s file of this checkpoint", file.path(), record.rank));
  // Files from before the step was recorded have none.
  if (const auto step = meta.find("step"); step != meta.end() && step->second != std::to_string(manifest_.step))
    throw UserError(fmt::format("{} was saved at step {}, but {} says step {}: the manifest was edited or belongs to "
                                "another save; use an earlier checkpoint",
                                file.path(), step->second, kManifestName, manifest_.step));
  for (const SafetensorsEntry& e : file.header().entries) {
    const auto key = parse_shard_key(e.name);
    const CheckpointTensor* tensor = key ? manifest_.find(key->name) : nullptr;
    const auto checksum = record.checksums.find(e.name);
    const bool known = tensor != nullptr &&
                       std::find(tensor->states.begin(), tensor->states.end(), key->state) != tensor->states.end();
    if (!known || e.dtype != "F32" || key->slice.begin.size() != tensor->shape.size() ||
        !contains(Slice::whole(tensor->shape), key->slice) || key->slice.extent() != e.shape ||
        checksum == record.checksums.end())
      throw UserError(fmt::format("{}: entry \"{}\" does not match {}; the checkpoint is damaged", file.path(), e.name,
                                  kManifestName));
    shards_[{key->state, key->name}].push_back({&file, &e, key->slice, checksum->second});
  }
}

void CheckpointReader::check_coverage() const {
  for (const CheckpointTensor& t : manifest_.tensors)
    for (const std::string& state : t.states) {
      const auto it = shards_.find(std::pair(state, t.name));
      std::int64_t covered = 0;
      if (it != shards_.end()) {
        const auto& shards = it->second;
        for (std::size_t i = 0; i < shards.size(); ++i) {
          covered += shards[i].slice.numel();
          for (std::size_t j = 0; j < i; ++j)
            if (intersect(shards[i].slice, shards[j].slice))
              throw UserError(fmt::format("checkpoint {}: slices of {} {} overlap ({} and {}); the checkpoint is "
                                          "damaged",
                                          dir_, state, t.name, shards[j].file->path(), shards[i].file->path()));
        }
      }
      if (covered != Slice::whole(t.shape).numel())
        throw UserError(fmt::format("checkpoint {}: no rank file holds all of {} {}; a rank file is missing or "
                                    "damaged",
                                    dir_, state, t.name));
    }
}

const std::string& CheckpointReader::data_state(int rank) const {
  for (const CheckpointFile& f : manifest_.files)
    if (f.rank == rank) return f.data_state;
  throw UserError(fmt::format("checkpoint {} has no data position for rank {}", dir_, rank));
}

bool CheckpointReader::has(std::string_view state, const std::string& name) const {
  return shards_.find(std::pair(std::string(state), name)) != shards_.end();
}

void CheckpointReader::read_shard(const Shard& shard, float* dst) const {
  const std::size_t bytes = shard.entry->end - shard.entry->begin;
  shard.file->read_bytes(*shard.entry, 0, dst, bytes);
  if (crc32_label(crc32_update(0, dst, bytes)) != shard.checksum)
    throw UserError(fmt::format("{}: tensor {} fails its checksum; the file is damaged: use an earlier checkpoint",
                                shard.file->path(), shard.entry->name));
  // A run that diverged can save NaN with a valid checksum; nothing useful comes of loading it.
  const std::size_t count = bytes / sizeof(float);
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(dst[i]))
      throw UserError(fmt::format("{}: tensor {} holds a non-finite value ({} at element {}); these weights are "
                                  "unusable: use an earlier checkpoint",
                                  shard.file->path(), shard.entry->name, dst[i], i));
}

void CheckpointReader::read(std::string_view state, const std::string& name, const Slice& region, float* out) const {
  const auto it = shards_.find(std::pair(std::string(state), name));
  USTRAIN_ASSERT(it != shards_.end(), "checkpoint lacks " + std::string(state) + " " + name);
  std::vector<float> staging;
  for (const Shard& shard : it->second) {
    if (shard.slice == region) {  // the common case: one rank's slice is exactly what is asked
      read_shard(shard, out);
      return;
    }
    const auto common = intersect(shard.slice, region);
    if (!common) continue;
    staging.resize(static_cast<std::size_t>(shard.slice.numel()));
    read_shard(shard, staging.data());
    copy_region(staging.data(), shard.slice, out, region, *common);
  }
}

namespace {

std::string other_shape_advice(const CheckpointReader& checkpoint) {
  return fmt::format(
      "the checkpoint was written for another model shape; use the recipe it was trained with (`ustrain ckpt "
      "inspect {}` prints it)",
      checkpoint.dir());
}

// A tensor of the checkpoint that the recipe's model does not hold: FP8 scaling state is
// skipped when only the weights are wanted; anything else is refused, saying what it is.
void check_unwanted_tensor(const CheckpointReader& checkpoint, const CheckpointTensor& t, bool with_optimizer) {
  // core/step/fp8_layers.h's names
  const bool fp8_state = t.name.ends_with(".fp8_scaling") || t.name.ends_with(".fp8_wgrad_scaling");
  if (fp8_state && !with_optimizer) return;  // the weights alone start a run or evaluate
  if (fp8_state)
    throw UserError(fmt::format(
        "checkpoint {} holds the FP8 scaling state {}, which this run does not keep: it was trained with "
        "train.precision = \"fp8\" and train.fp8_recipe = \"delayed\"; resume it with those, or start a run "
        "from its weights with checkpoint.init_from",
        checkpoint.dir(), t.name));
  if (t.states == std::vector<std::string>{std::string(kStateParam)} && !checkpoint.manifest().weights_only)
    throw UserError(fmt::format(
        "checkpoint {} holds the model state {}, which the recipe's model lacks: it is a mixture of experts' "
        "routing bias; set model.router_bias_update_rate > 0 as in the run that wrote it",
        checkpoint.dir(), t.name));
  throw UserError(fmt::format("checkpoint {} holds the tensor {}, which the recipe's model lacks: {}",
                              checkpoint.dir(), t.name, other_shape_advice(checkpoint)));
}

// Every parameter and model-state tensor the model holds is in the checkpoint with its shape
// (model state may be absent), nothing else is, and a resume has optimizer state to resume.
void check_checkpoint_matches(const CheckpointReader& checkpoint, const ModelParams& params, bool with_optimizer,
                              const ModelState& state) {
  const CheckpointManifest& m = checkpoint.manifest();
  std::set<std::string> wanted;
  const auto check_shape = [&](const ParamDecl& s, bool required) {
    wanted.insert(s.name);
    const CheckpointTensor* t = m.find(s.name);
    if (t == nullptr && required)
      throw UserError(fmt::format("checkpoint {} has no tensor {}: {}", checkpoint.dir(), s.name,
                                  other_shape_advice(checkpoint)));
    if (t != nullptr && t->shape != dims_of(s.shape))
      throw UserError(fmt::format("checkpoint {} holds {} with shape {}, the recipe's model needs {}: {}",
                                  checkpoint.dir(), s.name, shape_text(t->shape), s.shape.str(),
                                  other_shape_advice(checkpoint)));
  };
  for (const ParamDecl& s : params.whole_model()) check_shape(s, true);
  for (const ParamDecl& s : state.whole_model) check_shape(s, false);
  for (const CheckpointTensor& t : m.tensors)
    if (wanted.count(t.name) == 0) check_unwanted_tensor(checkpoint, t, with_optimizer);
  if (with_optimizer && m.weights_only)
    throw UserError(fmt::format("checkpoint {} holds weights only (an imported model) and cannot be resumed; start "
                                "a run from it with checkpoint.init_from = \"{}\"",
                                checkpoint.dir(), checkpoint.dir()));
}

// Each rank reads what it keeps of one state (whole tensors, or its chunks under ZeRO),
// whatever layout wrote the checkpoint: the reader assembles any box from the slices that hold it.
void load_param_state(const CheckpointReader& checkpoint, const ModelParams& params, Backend& backend,
                      std::string_view state, ParamState which) {
  std::vector<float> host;
  for (const ParamPiece& piece : params.held(which)) {
    const ParamSpec& s = params.specs()[static_cast<std::size_t>(piece.param)];
    std::int64_t at = 0;
    for (const Slice& box : flat_range_boxes(dims_of(s.local), piece.begin, piece.end, s.box_begin)) {
      const Tensor dst = piece.data.slice(at, at + box.numel());
      at += box.numel();
      if (dst.device == Device::cpu) {  // straight into the model's memory
        checkpoint.read(state, s.name, box, dst.f32());
        continue;
      }
      host.resize(static_cast<std::size_t>(box.numel()));
      checkpoint.read(state, s.name, box, host.data());
      backend.copy(dst, Tensor(host.data(), dst.shape));
    }
  }
}

// The model state this rank holds (MoE routing biases); one absent from the checkpoint starts
// at zero unless it is kept as it is.
void load_held_model_state(const CheckpointReader& checkpoint, const ModelState& state) {
  int absent = 0;
  for (const ModelStateTensor& s : state.held) {
    if (checkpoint.manifest().find(s.name) == nullptr && s.kept_when_absent) continue;
    if (checkpoint.manifest().find(s.name) == nullptr) {
      std::fill(s.values->begin(), s.values->end(), 0.0f);
      ++absent;
      continue;
    }
    checkpoint.read(kStateParam, s.name, Slice::whole({static_cast<std::int64_t>(s.values->size())}), s.values->data());
  }
  if (absent > 0)
    spdlog::info("checkpoint {} has no routing bias for {} MoE layer(s): they start at zero", checkpoint.dir(), absent);
}

}  // namespace

void load_model_state(const CheckpointReader& checkpoint, const ModelParams& params, Backend& backend,
                      bool with_optimizer, const ModelState& state) {
  check_checkpoint_matches(checkpoint, params, with_optimizer, state);
  load_param_state(checkpoint, params, backend, kStateParam, ParamState::value);
  if (with_optimizer) {
    load_param_state(checkpoint, params, backend, kStateAdamM, ParamState::adam_m);
    load_param_state(checkpoint, params, backend, kStateAdamV, ParamState::adam_v);
  }
  load_held_model_state(checkpoint, state);
  params.refresh_compute_copy(backend);
  backend.synchronize();
}

}  // namespace ustrain
