// The command lines that start a training run of several processes, for `--dry-run` of a
// layout that one process cannot run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ustrain {

// `ustrain train` as the user gave it: the recipe file and the --set options, in order.
struct TrainCommand {
  std::string recipe_path;
  std::vector<std::string> overrides;  // KEY=VALUE
};

// `word` as one POSIX shell word: as it is when it holds only safe characters, else in single
// quotes.
std::string shell_word(const std::string& word);

// The mpirun, srun and sbatch (scripts/slurm/train.sbatch) lines that start `command` as
// `ranks` processes, one a line, each indented by two spaces.
std::string launch_lines(const TrainCommand& command, std::int64_t ranks);

}  // namespace ustrain
