// The run's metrics, written as each step and evaluation ends: JSON lines (metrics.jsonl) and
// TensorBoard events (events.out.tfevents.*), as the recipe's [log] section asks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/recipe/recipe.h"

namespace ustrain {

class EventFile;
class RunFile;

class MetricsLog {
 public:
  // Opens in the existing directory `run_dir` the outputs `log` asks for: metrics.jsonl,
  // appended to (a resumed run continues it) and created only with the first row, so that a
  // run that fails before its first step leaves none; and a new event file. `resumed_step` is the
  // checkpoint step a resumed run continues from; a new start (nullopt) first removes the
  // event files of an earlier run in `run_dir`, whatever `log` says, as the trainer removes its
  // metrics.jsonl. Throws UserError naming a file that cannot be opened.
  MetricsLog(const std::string& run_dir, const LogSection& log, std::optional<std::int64_t> resumed_step);
  ~MetricsLog();

  // Appends {"kind": kind, <numbers in the given order>, "time": unix seconds} to metrics.jsonl
  // and flushes, so nothing is lost if the process dies. Doubles are written to round-trip
  // exactly; integral values are written without a fraction ("step": 10); non-finite values
  // as null. Names must be unique and not "kind" or "time", and "step" must be among them.
  // The event file gets one event at that step with a float32 scalar "KIND/NAME" per other
  // finite number ("train/loss"). Throws UserError if a write fails.
  void write(const std::string& kind, const std::vector<std::pair<std::string, double>>& numbers);

  // Flushes metrics.jsonl to disk (fsync), so that what a checkpoint's steps logged survives
  // a crash of the machine with the checkpoint. Throws UserError if it fails.
  void sync();

  // The files written, comma-separated, for the log; empty when there are none.
  std::string files() const;

 private:
  std::string jsonl_path_;  // empty: no metrics.jsonl
  // Opened at the first row, not before: a run that fails before its first step leaves no
  // metrics.jsonl, which would make the next start refuse the directory as holding a run.
  std::unique_ptr<RunFile> jsonl_;
  std::unique_ptr<EventFile> events_;
};

}  // namespace ustrain
