// What a training run settles about its directories before the first step: that it alone
// uses the run directory, and that it will be able to save checkpoints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/distributed/process_layout.h"
#include "core/run/run_lock.h"

namespace ustrain {

// Takes the run directory's lock (core/run/run_lock.h), then checks that `resume_from`, found
// from `resume` before the lock was held, is still the checkpoint to resume from: a trainer
// that held the lock until moments ago may have saved a newer one.
RunLock lock_run_directory(const std::string& run_dir, const std::string& resume,
                           const std::optional<std::string>& resume_from);

// Collective over every rank: each checks that it can write into the checkpoint directory
// `root`, the leading rank that its filesystem has room for one checkpoint (every rank's
// `rank_bytes` together), warning below two. A failure on any rank stops every rank.
void check_can_save(ProcessLayout& layout, const std::string& root, std::uint64_t rank_bytes);

}  // namespace ustrain
