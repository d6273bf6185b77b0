// Subcommands of the ustrain binary. Each adds itself to the root app and installs a
// callback that does the work; errors the user can fix are thrown as UserError.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ustrain::app {

void add_train_command(CLI::App& root);
void add_generate_command(CLI::App& root);
void add_data_command(CLI::App& root);
void add_bench_command(CLI::App& root);
void add_plan_command(CLI::App& root);
void add_recipe_command(CLI::App& root);
void add_eval_command(CLI::App& root);
void add_ckpt_command(CLI::App& root);

// Thrown by a command that finished cleanly but must report a particular exit status, e.g.
// `train` stopped by a signal after saving a checkpoint (kExitStopped in core/run/signals.h).
struct ExitStatus {
  int code;
};

// `--set KEY=VALUE` (repeatable; one pair per flag, so a following positional is not taken).
// `also`: what the command does with the keys set, appended to the help.
void add_set_option(CLI::App& cmd, std::vector<std::string>& overrides, const std::string& also = "");

// Logging to stdout with timestamps, readable on a terminal and in a Slurm log file.
void setup_logging(const char* level);

}  // namespace ustrain::app
