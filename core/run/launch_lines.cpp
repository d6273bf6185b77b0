#include "core/run/launch_lines.h"

#include <fmt/format.h>

namespace ustrain {

std::string shell_word(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                            "0123456789_-+=.,/:@%") == std::string::npos;
  if (safe) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string launch_lines(const TrainCommand& command, std::int64_t ranks) {
  std::string args = shell_word(command.recipe_path);
  for (const std::string& set : command.overrides) args += " --set " + shell_word(set);
  return fmt::format("  mpirun -n {0} ustrain train {1}\n"
                     "  srun --mpi=pmix -n {0} ustrain train {1}\n"
                     "  sbatch --ntasks={0} scripts/slurm/train.sbatch {1}\n",
                     ranks, args);
}

}  // namespace ustrain
