#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>

#include "app/cmd_data_commands.h"
#include "app/number_checks.h"
#include "data/convert/data_bench.h"

namespace ustrain::app {

void add_data_bench_command(CLI::App& data) {
  auto o = std::make_shared<DataBenchOptions>();
  o->dir = "data-bench";
  CLI::App* bench = data.add_subcommand(
      "bench", "Measure conversion (MB/s of text, byte, sentencepiece and --tokenizer files, 1..N workers) and "
               "loader (tokens/s) "
               "throughput on a synthetic corpus");
  bench->add_option("--dir", o->dir, "Scratch directory to create and remove afterwards")->capture_default_str();
  bench->add_option("--text-mb", o->text_mb, "Corpus size for the byte tokenizer and the loader")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  bench->add_option("--sp-text-mb", o->sp_text_mb, "Corpus size for sentencepiece")->capture_default_str()->check(CLI::Range(1, 100000));
  bench->add_option("--sp-vocab", o->sp_vocab, "sentencepiece vocabulary size")->capture_default_str();
  bench->add_option("--workers", o->max_workers, "Measure 1 to this many workers")->capture_default_str()->check(CLI::Range(1, 256));
  // A batch of seq_len tokens is held several times in memory: both stay far from overflow.
  bench->add_option("--seq-len", o->seq_len, "Loader sequence length")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  bench->add_option("--batch", o->batch, "Loader micro-batch")->capture_default_str()->check(CLI::Range(1, 4096));
  bench->add_option("--seconds", o->loader_seconds, "Seconds per loader measurement")->capture_default_str();
  bench->add_option("--step-ms", o->step_ms, "Simulated training work per batch when measuring waiting")
      ->capture_default_str();
  bench->add_option("--tokenizer", o->tokenizers,
                    "Also measure this tokenizer file (tokenizer.json, .tiktoken named after its encoding, .model): "
                    "encoding on one thread and conversion with 1..N workers (repeatable)");
  bench->add_flag("--keep", o->keep, "Keep the scratch directory");
  bench->callback([o] {
    run_data_bench(*o, [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    });
  });
}

}  // namespace ustrain::app
