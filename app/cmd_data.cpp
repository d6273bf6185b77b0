#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "app/cmd_data_commands.h"
#include "app/commands.h"
#include "app/number_checks.h"
#include "data/convert/convert.h"
#include "kernels/error.h"

namespace ustrain::app {

void add_data_command(CLI::App& root) {
  CLI::App* data = root.add_subcommand("data", "Prepare and examine datasets (HDF5 token shards)");
  data->require_subcommand(1);
  add_data_convert_command(*data);
  add_data_tokenizer_command(*data);
  add_data_inspect_command(*data);
  add_data_bench_command(*data);
}

void add_max_document_option(CLI::App& command, std::int64_t& max_document_bytes) {
  command
      .add_option_function<std::int64_t>(
          "--max-document-mib", [&max_document_bytes](std::int64_t mib) { max_document_bytes = mib << 20; },
          "text/jsonl: the longest document (JSONL line) in MiB; a longer one stops the run naming it (a file "
          "without document separators, a decompression bomb)")
      ->default_str(std::to_string(max_document_bytes >> 20))
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
}

// `data convert`'s tokenizer and its end-of-document token.
void add_convert_tokenizer_options(CLI::App& convert, ConvertOptions& o) {
  convert.add_option("--tokenizer,-t", o.tokenizer,
                     "text/jsonl: byte (default), a sentencepiece .model, a Hugging Face tokenizer.json (its EOS from "
                     "the tokenizer_config.json beside it; see --eos-token) or a tiktoken .tiktoken file; token "
                     "formats: one of those, or the name of the tokenizer that made the ids (with --vocab-size); "
                     "shards: another tokenizer re-tokenizes");
  convert.add_option("--tiktoken-pattern", o.tiktoken_pattern,
                     "A .tiktoken file's pre-tokenizer: gpt2, cl100k_base or o200k_base (their regex and special "
                     "tokens, e.g. <|endoftext|>), or a regex; default: the file's name if it is one of those");
  convert.add_option("--tiktoken-special", o.tiktoken_special_tokens,
                     "A .tiktoken file's special token TOKEN=ID (repeatable); <|endoftext|> is the EOS");
  convert.add_option("--vocab-size", o.vocab_size, "Token formats with a named tokenizer: its vocabulary size")
      ->check(positive());
  CLI::Option* eos_id =
      convert.add_option("--eos-id", o.eos_id,
                         "The end-of-document id: a Hugging Face tokenizer file ends documents with it; token "
                         "formats split llm.c and 1-D NumPy streams into documents by it (llm.c default 50256)")
          ->check(non_negative());
  convert.add_option("--eos-token", o.eos_token,
                     "The end-of-document token by name, looked up in the tokenizer file, e.g. '<|endoftext|>'; "
                     "default: tokenizer_config.json's eos_token, but <|endoftext|> where that names a chat-turn "
                     "end such as <|im_end|> (Qwen); the output says which")
      ->excludes(eos_id);
}

// `data convert`: how text divides into documents, and which files are read.
void add_convert_document_options(CLI::App& convert, ConvertOptions& o) {
  convert.add_option("--split", o.split,
                     "text: how files divide into documents: file | blank-line | line:MARKER (a line equal to "
                     "MARKER separates documents, e.g. line:% for fortune files)")
      ->capture_default_str();
  convert.add_option("--text-field", o.text_field, "jsonl: the field that holds each document's text")
      ->capture_default_str();
  add_max_document_option(convert, o.max_document_bytes);
  convert.add_option("--include", o.include,
                     "File-name globs to take, e.g. --include '*.md' (repeatable; default: every file; files in "
                     "directories that are not text are skipped when converting text)");
  convert.add_option("--exclude", o.exclude, "File-name globs to skip, e.g. --exclude '*.dat' (repeatable)");
}

// `data convert`: the split's seed, the shards' size and compression, the threads.
void add_convert_output_options(CLI::App& convert, ConvertOptions& o) {
  convert.add_option("--seed", o.seed, "Seed of the train/validation assignment")->capture_default_str();
  convert.add_option("--shard-tokens", o.shard_tokens, "Maximum tokens per shard file")
      ->capture_default_str()
      ->check(positive());
  convert.add_option("--compression", o.compression,
                     "Deflate level of the shards, 0 (none) to 9; compressed shards load more slowly")
      ->capture_default_str()
      ->check(CLI::Range(0, 9));
  convert.add_option("--workers,-j", o.workers, "Tokenizing threads (the output does not depend on them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
}

void add_data_convert_command(CLI::App& data) {
  auto o = std::make_shared<ConvertOptions>();
  o->workers = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  auto eos = std::make_shared<std::string>("auto");
  auto no_eos = std::make_shared<bool>(false);
  CLI::App* convert = data.add_subcommand(
      "convert", "Convert text, JSONL, Megatron, llm.c or NumPy token files, or datasets, into HDF5 shards with a "
                 "train/val split");
  convert->add_option("--input,-i", o->inputs,
                      "Files or directories (read recursively, in sorted order); text and JSONL may be .gz or "
                      ".zst; a file reached twice (a link, a copy) is read once")
      ->required();
  convert->add_option("--output,-o", o->output_dir, "Dataset directory to create (must not exist or be empty)")
      ->required();
  convert->add_option("--format,-f", o->format,
                      "Input format; default: detected from the input (extension, magic number, a directory's "
                      "manifest.json or files), as the first line on stderr says")
      ->check(CLI::IsMember({"text", "jsonl", "megatron", "llmc", "npy", "shards"}));
  add_convert_tokenizer_options(*convert, *o);
  add_convert_document_options(*convert, *o);
  convert->add_option("--eos", *eos,
                      "End of each document: append the EOS id (unless already there), none, or auto (append for "
                      "text, keep token ids as they are; a Megatron conversion says when its documents lack EOS)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "append", "none"}));
  convert->add_flag("--no-eos", *no_eos, "Same as --eos none");
  CLI::Option* val_fraction =
      convert->add_option("--val-fraction", o->val_fraction, "Share of documents held out for validation")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 0.9));
  add_convert_output_options(*convert, *o);
  convert->callback([o, eos, no_eos, val_fraction] {
    ConvertOptions options = *o;
    if (options.format == "shards" && val_fraction->count() > 0)
      throw UserError("--val-fraction does not apply to --format shards: every document keeps its split");
    options.eos = *no_eos || *eos == "none" ? EosMode::none : *eos == "append" ? EosMode::append : EosMode::automatic;
    const ConvertReport r = convert_dataset(
        options, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }, stderr);
    fmt::print("wrote {}: {} documents, {} train + {} validation tokens in {} shard(s), tokenizer {}; {:.1f} MB "
               "read in {:.2f} s ({:.1f} MB/s)\n",
               options.output_dir, r.documents, r.train_tokens, r.val_tokens, r.shards, r.tokenizer,
               static_cast<double>(r.bytes_read) / 1e6, r.seconds,
               r.seconds > 0 ? static_cast<double>(r.bytes_read) / 1e6 / r.seconds : 0.0);
  });
}

}  // namespace ustrain::app
