#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>

#include "app/cmd_data_commands.h"
#include "app/number_checks.h"
#include "data/inspect/inspect.h"

namespace ustrain::app {

void add_data_inspect_command(CLI::App& data) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* inspect = data.add_subcommand(
      "inspect", "Show a dataset: totals, shards, tokenizer, token frequencies and sample windows as text");
  inspect->add_option("dir", o->dir, "Dataset directory")->required();
  inspect->add_option("--samples", o->samples, "Sample windows to decode")->capture_default_str()->check(CLI::Range(0, 1000));
  inspect->add_option("--sample-tokens", o->sample_tokens, "Tokens per sample window")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  inspect->add_option("--top", o->top, "Most frequent ids to list")->capture_default_str()->check(CLI::Range(0, 100000));
  inspect->add_option("--count-tokens", o->count_tokens, "Tokens counted at most for the frequencies (more: an even sample)")
      ->capture_default_str()
      ->check(positive());
  inspect->add_option("--max-shards", o->max_shards, "Shard table rows per split (0: all)")
      ->capture_default_str()
      ->check(non_negative());
  inspect->add_option("--seed", o->seed, "Where the sample windows lie")->capture_default_str();
  inspect->add_flag("--verify", o->verify, "Also read every shard and check its checksum");
  inspect->callback([o] { fmt::print("{}", inspect_dataset(*o)); });
}

}  // namespace ustrain::app
