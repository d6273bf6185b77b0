// What a user may pass where a checkpoint is expected: a checkpoint directory, the `latest`
// link, a run's checkpoints/ directory or a run directory (its newest complete checkpoint).
#pragma once

#include <optional>
#include <string>

namespace ustrain {

// The checkpoint directory `path` names. UserError when it does not exist or is a run (or
// checkpoints) directory without a complete checkpoint. A directory that is not a checkpoint
// is returned as it is: CheckpointReader then says what it lacks.
std::string locate_checkpoint(const std::string& path);

// The newest complete checkpoint of the run directory `run_dir` (`generate --run`, `eval
// --run`). UserError naming the directory when it does not exist, is not a run directory
// (neither checkpoints/ nor recipe.toml), or holds no complete checkpoint yet, with what to do.
std::string locate_run_checkpoint(const std::string& run_dir);

// For `train --resume`: "auto" gives the newest complete checkpoint of the run directory or
// nullopt when it has none yet (a first start); anything else is located as above.
std::optional<std::string> find_resume_checkpoint(const std::string& resume, const std::string& run_dir);

}  // namespace ustrain
