// The checkpoints of one run, RUN_DIR/checkpoints:
//
//   step-00000500/   complete checkpoints (core/checkpoint/format.h)
//   step-00001000/
//   latest -> step-00001000   a symlink to the newest complete checkpoint
//
// Crash safety. A save writes into step-N.tmp; every file is fsynced, manifest.json is
// written last; then the directory is fsynced and renamed to step-N (atomic), the parent is
// fsynced, and `latest` is replaced by renaming a new symlink over it (atomic). Deleting an
// old checkpoint first renames it to step-N.deleting. So at any instant every step-N
// directory is complete and `latest` names one of them: a process killed at any moment
// leaves the previous checkpoints loadable. Leftover .tmp and .deleting directories are
// removed when the next run starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/faults.h"

namespace ustrain {

class CheckpointDirectory {
 public:
  explicit CheckpointDirectory(std::string root);

  const std::string& root() const { return root_; }
  static std::string name_of(std::int64_t step);  // "step-00001000"
  std::string path_of(std::int64_t step) const;

  // Steps of the complete checkpoints (step-N with a manifest.json), ascending.
  std::vector<std::int64_t> complete_steps() const;
  // The newest complete checkpoint's path.
  std::optional<std::string> newest() const;

  // Removes what interrupted saves and deletions left behind and repairs `latest`.
  void remove_leftovers() const;
  // Creates an empty step-N.tmp (replacing a stale one) and returns its path.
  std::string stage(std::int64_t step) const;
  // step-N.tmp's path (the other ranks of a job write into the one rank 0 staged).
  std::string staging_path(std::int64_t step) const { return path_of(step) + ".tmp"; }
  // Renames step-N.tmp to step-N and points `latest` at it (see above).
  void publish(std::int64_t step, SaveFaults& faults) const;
  // Deletes every complete checkpoint except the newest `keep_last` and, when keep_every > 0,
  // those whose step is a multiple of keep_every. Returns the deleted steps.
  std::vector<std::int64_t> retain(std::int64_t keep_last, std::int64_t keep_every, SaveFaults& faults) const;
  // Moves complete checkpoints with a step above `step` (or equal, with `inclusive`) into
  // checkpoints/abandoned/, so that a run resumed from an older checkpoint neither collides
  // with them nor later resumes from them. Returns the moved steps.
  std::vector<std::int64_t> set_aside_after(std::int64_t step, bool inclusive) const;
  // Deletes every checkpoint of the run (train --overwrite).
  void remove_all() const;

 private:
  void point_latest_at(const std::optional<std::int64_t>& step) const;

  std::string root_;
};

}  // namespace ustrain
