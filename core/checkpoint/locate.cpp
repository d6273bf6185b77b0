#include "core/checkpoint/locate.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/checkpoint/dir.h"
#include "core/checkpoint/format.h"
#include "data/path_status.h"
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

std::optional<std::string> find_resume_checkpoint(const std::string& resume, const std::string& run_dir) {
  if (resume == "auto") return CheckpointDirectory(run_dir + "/checkpoints").newest();
  return locate_checkpoint(resume);
}

}  // namespace ustrain
