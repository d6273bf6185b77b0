#include "core/train/resume.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint/compat.h"
#include "core/checkpoint/reader.h"
#include "core/run/run_file.h"
#include "core/step/run_schedule.h"
#include "data/files/json_input.h"
#include "kernels/byte_text.h"

namespace ustrain {
namespace fs = std::filesystem;

ResumedRun resume_training(const std::string& checkpoint, const Recipe& recipe, bool force,
                           const CheckpointDirectory& run_checkpoints, const ModelParams& params, Backend& backend,
                           TrainingData& data, bool leads, const ModelState& state) {
  const CheckpointReader reader(checkpoint);
  const CheckpointManifest& m = reader.manifest();
  const auto changes = recipe_changes(m.recipe, to_toml(recipe));
  check_resume_changes(changes, force, checkpoint);
  for (const RecipeChange& c : changes) {
    if (c.kind == RecipeChangeKind::harmless || c.kind == RecipeChangeKind::reassociates)
      spdlog::info("recipe change since the checkpoint: {}", describe(c));
    else
      spdlog::warn("recipe change since the checkpoint, forced: {}", describe(c));
  }
  if (m.step > recipe.train.steps)
    throw UserError(fmt::format("checkpoint {} is at step {}, past train.steps = {}; raise train.steps to continue",
                                checkpoint, m.step, recipe.train.steps));
  if (const std::optional<std::string> note = stretched_schedule_note(m.recipe, recipe, m.step))
    spdlog::info("{}", *note);
  if (m.backend != backend.name())
    spdlog::warn("checkpoint {} was saved on {}, this run computes on {}: losses will match the uninterrupted run "
                 "only up to rounding",
                 checkpoint, m.backend, backend.name());

  const auto start = std::chrono::steady_clock::now();
  load_model_state(reader, params, backend, /*with_optimizer=*/true, state);
  data.restore(reader.data_state(0), m.tokens_seen);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::uint64_t bytes = 0;
  for (const CheckpointFile& f : m.files) bytes += f.bytes;
  spdlog::info("loaded {} of model and optimizer state in {:.2f} s ({}/s)", format_gigabytes(static_cast<double>(bytes)),
               seconds, format_gigabytes(static_cast<double>(bytes) / std::max(seconds, 1e-9)));

  // Checkpoints ahead of the one resumed from, and (when it comes from elsewhere) one at the
  // same step, belong to another continuation.
  fs::path resumed = fs::absolute(checkpoint).lexically_normal();
  if (!resumed.has_filename()) resumed = resumed.parent_path();  // "step-00000010/"
  std::error_code ec;
  const bool own = fs::equivalent(resumed.parent_path(), run_checkpoints.root(), ec);
  const auto moved = leads ? run_checkpoints.set_aside_after(m.step, /*inclusive=*/!own) : std::vector<std::int64_t>{};
  if (!moved.empty())
    spdlog::warn("moved the checkpoints of step(s) {} to {}/abandoned: they continue the run differently",
                 fmt::join(moved, ", "), run_checkpoints.root());
  spdlog::info("resumed from {} at step {} ({} tokens seen)", checkpoint, m.step, m.tokens_seen);
  return {m.step, m.tokens_seen, m.loss_scale};
}

void drop_metrics_after(const std::string& metrics_path, std::int64_t step) {
  std::ifstream in(metrics_path);
  if (!in) return;
  std::string kept, line;
  int torn = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    // A line that does not parse was torn by a crash or a full disk: it goes too.
    const auto j = parse_json_or_discarded(line);
    if (!j.is_object()) {
      ++torn;
      continue;
    }
    const bool later = j.contains("step") && j["step"].is_number() && j["step"].get<double>() > step;
    if (!later) kept += line + "\n";
  }
  if (torn > 0) spdlog::warn("{}: dropped {} incomplete line(s), written when the run was interrupted", metrics_path, torn);
  const std::string staged = metrics_path + ".tmp";
  write_run_file(staged, kept, /*durable=*/true);
  std::error_code ec;
  fs::rename(staged, metrics_path, ec);
  if (ec) throw UserError(fmt::format("cannot replace {}: {}", metrics_path, ec.message()));
}

}  // namespace ustrain
