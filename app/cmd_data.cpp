#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "app/commands.h"
#include "data/text_convert.h"

namespace ustrain::app {

void add_data_command(CLI::App& root) {
  CLI::App* data = root.add_subcommand("data", "Prepare datasets (HDF5 token shards)");
  data->require_subcommand(1);

  auto opt = std::make_shared<TextConvertOptions>();
  auto no_eos = std::make_shared<bool>(false);
  CLI::App* convert = data->add_subcommand(
      "convert", "Convert plain-text files or directories into byte-tokenized HDF5 shards with a train/val split");
  convert->add_option("--input,-i", opt->inputs, "Text files or directories (read recursively, in sorted order)")
      ->required();
  convert->add_option("--output,-o", opt->output_dir, "Dataset directory to create (must not exist or be empty)")
      ->required();
  convert->add_option("--split", opt->split,
                      "How files divide into documents: file | blank-line | line:MARKER "
                      "(a line equal to MARKER separates documents, e.g. line:% for fortune files)")
      ->capture_default_str();
  convert->add_option("--val-fraction", opt->val_fraction, "Share of documents held out for validation")
      ->capture_default_str()->check(CLI::Range(0.0, 0.9));
  convert->add_option("--seed", opt->seed, "Seed of the train/validation assignment")->capture_default_str();
  convert->add_option("--shard-tokens", opt->shard_tokens, "Maximum tokens per shard file")
      ->capture_default_str()->check(CLI::PositiveNumber);
  convert->add_option("--exclude", opt->exclude, "File-name globs to skip, e.g. --exclude '*.dat' (repeatable)");
  convert->add_flag("--no-eos", *no_eos, "Do not append an end-of-document token after each document");
  convert->callback([opt, no_eos] {
    TextConvertOptions o = *opt;
    o.eos = !*no_eos;
    const ConvertReport r = convert_text(o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    fmt::print("wrote {}: {} documents, {} train + {} validation tokens in {} shard(s); {:.1f} MB of text in "
               "{:.2f} s ({:.1f} MB/s)\n",
               o.output_dir, r.documents, r.train_tokens, r.val_tokens, r.shards,
               static_cast<double>(r.bytes_read) / 1e6, r.seconds,
               r.seconds > 0 ? static_cast<double>(r.bytes_read) / 1e6 / r.seconds : 0.0);
  });
}

}  // namespace ustrain::app
