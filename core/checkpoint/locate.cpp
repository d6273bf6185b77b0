#include "core/checkpoint/locate.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/checkpoint/dir.h"
#include "core/checkpoint/format.h"
#include "data/files/path_status.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;

std::string locate_checkpoint(const std::string& path) {
  std::error_code ec;
  if (const PathStatus status = path_status(path); status.access != PathAccess::exists)
    throw UserError(fmt::format("checkpoint {} {}", path, describe_unusable(status)));
  if (fs::exists(fs::path(path) / kManifestName, ec)) return path;
  for (const std::string& root : {path + "/checkpoints", path}) {
    const CheckpointDirectory dir(root);
    if (const auto newest = dir.newest()) return *newest;
  }
  if (fs::is_directory(fs::path(path) / "checkpoints", ec))
    throw UserError(fmt::format("run directory {} has no complete checkpoint yet", path));
  return path;
}

std::string locate_run_checkpoint(const std::string& run_dir) {
  std::error_code ec;
  if (const PathStatus status = path_status(run_dir); status.access != PathAccess::exists)
    throw UserError(fmt::format("run directory {} {}", run_dir, describe_unusable(status)));
  const bool has_checkpoints = fs::is_directory(fs::path(run_dir) / "checkpoints", ec);
  if (!has_checkpoints && !fs::exists(fs::path(run_dir) / "recipe.toml", ec))
    throw UserError(fmt::format("{} is not a run directory (it has neither checkpoints/ nor recipe.toml); pass the "
                                "run directory that `ustrain train` wrote, e.g. runs/quickstart, or --checkpoint PATH",
                                run_dir));
  if (const auto newest = CheckpointDirectory(run_dir + "/checkpoints").newest()) return *newest;
  throw UserError(fmt::format("run directory {} has no checkpoint yet: training saves one every "
                              "checkpoint.interval steps and at its end; let the run get that far (continue it "
                              "with `ustrain train {}/recipe.toml --resume auto`), or pass --checkpoint PATH",
                              run_dir, run_dir));
}

std::optional<std::string> find_resume_checkpoint(const std::string& resume, const std::string& run_dir) {
  if (resume == "auto") return CheckpointDirectory(run_dir + "/checkpoints").newest();
  return locate_checkpoint(resume);
}

}  // namespace ustrain
