// The subcommands of `ustrain data`, each in its own file (app/cmd_data_*.cpp).
#pragma once

#include <cstdint>

namespace CLI {
class App;
}

namespace ustrain::app {

void add_data_convert_command(CLI::App& data);
void add_data_tokenizer_command(CLI::App& data);
void add_data_inspect_command(CLI::App& data);
void add_data_bench_command(CLI::App& data);

// --max-document-mib of the commands that read text and JSONL: sets `max_document_bytes`.
void add_max_document_option(CLI::App& command, std::int64_t& max_document_bytes);

}  // namespace ustrain::app
