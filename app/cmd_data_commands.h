// The subcommands of `ustrain data`, each in its own file (app/cmd_data_*.cpp).
#pragma once

namespace CLI {
class App;
}

namespace ustrain::app {

void add_data_convert_command(CLI::App& data);
void add_data_tokenizer_command(CLI::App& data);
void add_data_inspect_command(CLI::App& data);
void add_data_bench_command(CLI::App& data);

}  // namespace ustrain::app
