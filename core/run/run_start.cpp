#include "core/run/run_start.h"

#include <fmt/format.h>

#include "core/checkpoint/locate.h"
#include "core/checkpoint/space.h"
#include "core/distributed/fail_together.h"
#include "kernels/error.h"

namespace ustrain {

RunLock lock_run_directory(const std::string& run_dir, const std::string& resume,
                           const std::optional<std::string>& resume_from) {
  RunLock lock(run_dir);
  if (!resume.empty()) {
    const std::optional<std::string> now = find_resume_checkpoint(resume, run_dir);
    if (now != resume_from)
      throw UserError(fmt::format("the checkpoint to resume {} from changed while this run started ({} instead of "
                                  "{}): another trainer saved it and has just finished; run the same command again",
                                  run_dir, now.value_or("none"), resume_from.value_or("none")));
  }
  return lock;
}

void check_can_save(ProcessLayout& layout, const std::string& root, std::uint64_t rank_bytes) {
  ProcessGroup& world = layout.groups().world();
  const auto checkpoint_bytes = static_cast<std::uint64_t>(world.sum(static_cast<double>(rank_bytes)));
  fail_together(world.host(), [&] {
    check_checkpoint_directory(root);
    if (layout.leads()) check_checkpoint_space(root, checkpoint_bytes);
  });
}

}  // namespace ustrain
